#include "launcher/job/elastic_late_workers.hpp"

#include <spdlog/spdlog.h>

#include "common/control_message.hpp"
#include "common/duration_text.hpp"
#include "common/log.hpp"

namespace hvrun {

LateWorkers::LateWorkers(boost::asio::io_context& io, AgentLinks& links, const ElasticWorkers& workers)
    : links_(links), workers_(workers), late_timer_(io), replace_timer_(io) {}

void LateWorkers::arm_grace(std::function<void()> over) {
  late_timer_.expires_after(kLateGrace);
  late_timer_.async_wait([over = std::move(over)](auto ec) {
    if (!ec) over();
  });
}

void LateWorkers::arm_replace(std::function<void()> due) {
  replace_timer_.expires_after(kReplaceAfter);
  replace_timer_.async_wait([due = std::move(due)](auto ec) {
    if (!ec) due();
  });
}

void LateWorkers::replace(const std::function<std::optional<SlotInfo>(const SlotKey&)>& slot_of) {
  for (const SlotKey& k : late_) {
    const auto id = workers_.running_at(k);
    const auto slot = slot_of(k);
    if (!id || !slot || replacing_.contains(k)) continue;
    if (slot->rank == 0) {
      // The others sync their state from rank 0 on each reset (state.sync()): a fresh rank 0 would hand
      // them its initial state, losing the training's. Left to Gloo's timeout.
      log_of(LogSubsys::kRank).info("{} is silent, but rank 0 of the new world: left to Gloo's timeout", slot_text(k));
      continue;
    }
    const std::size_t host = workers_.host_of(*id);
    if (!links_.live(host)) continue;
    spdlog::warn("worker {} is still silent {} after the failure (blocked in a collective until Gloo's timeout, "
                 "HOROVOD_GLOO_TIMEOUT_SECONDS): replacing it with a fresh worker",
                 slot_text(k), seconds_text(kLateGrace + kReplaceAfter));
    replacing_.insert(k);
    links_.send(host, TerminateMsg{0, {*id}});
  }
}

void LateWorkers::cancel() {
  late_timer_.cancel();
  replace_timer_.cancel();
}

}  // namespace hvrun

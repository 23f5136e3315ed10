#include "launcher/job/elastic_held_workers.hpp"

#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/log.hpp"
#include "launcher/base/host_names.hpp"

namespace hvrun {

HeldWorkers::HeldWorkers(boost::asio::io_context& io, ElasticPhase& phase, const std::vector<SlotInfo>& world,
                         Hooks hooks)
    : phase_(phase), world_(world), hooks_(std::move(hooks)), forming_timer_(io) {}

void HeldWorkers::form(const std::vector<int>& started, std::function<bool()> due) {
  if (held_.empty() || started.empty()) return release_held();
  forming_.insert(started.begin(), started.end());
  phase_.move_to(ElasticPhase::Phase::kForming);
  log_of(LogSubsys::kRendezvous)
      .info("holding the {} workers of the last world until the {} new ones reach the rendezvous", held_.size(),
            forming_.size());
  forming_timer_.expires_after(kFormingTimeout);
  forming_timer_.async_wait([this, due = std::move(due)](auto ec) {
    if (ec || !due()) return;
    spdlog::warn("elastic: {} new workers ({}) did not reach the rendezvous within {}; the others go ahead and "
                 "wait for them in Gloo's rendezvous. Check those hosts' start-up: the program's imports, its "
                 "Python environment, a slow or full disk",
                 forming_.size(), forming_slots_text(), seconds_text(kFormingTimeout));
    release_held();
  });
}

// The new workers that have not begun the rendezvous, by slot ("host[local rank]").
std::string HeldWorkers::forming_slots_text() const {
  std::vector<std::string> slots;
  for (const SlotInfo& s : world_)
    if (forming_.contains(s.rank)) slots.push_back(slot_text({s.host, s.local_rank}));
  return fold_names(slots);
}

void HeldWorkers::reached(int rank) {
  if (forming_.erase(rank) == 0) return;
  log_of(LogSubsys::kRendezvous).debug("rank {} of the new world reached the rendezvous", rank);
  if (forming_.empty()) release_held();
}

void HeldWorkers::end_forming() {
  forming_.clear();
  forming_timer_.cancel();
  if (phase_.phase() == ElasticPhase::Phase::kForming) phase_.move_to(ElasticPhase::Phase::kOpen);
}

void HeldWorkers::release_held() {
  end_forming();
  auto answers = std::move(held_);
  held_.clear();
  for (auto& [key, answer] : answers) {
    hooks_.answered(key);  // it was waiting, not silent
    const auto slot = hooks_.slot_of(key);
    answer(slot ? slot->response() : kUnassigned);
  }
  hooks_.released();
}

std::optional<RoundEnd> HeldWorkers::record_held_ready(WorkerRegistry& registry, const std::string& failing_host) {
  if (forming_.empty()) return std::nullopt;
  end_forming();
  for (const auto& [key, answer] : held_) {
    if (key.first == failing_host || !hooks_.slot_of(key) || registry.has_recorded(key.first, key.second)) continue;
    if (auto end = registry.record(key.first, key.second, WorkerState::kReady, false)) return end;
  }
  return std::nullopt;
}

}  // namespace hvrun

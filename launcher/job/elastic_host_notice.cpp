#include "launcher/job/elastic_host_notice.hpp"

#include <chrono>
#include <ctime>
#include <spdlog/spdlog.h>

#include "common/log.hpp"

namespace hvrun {

namespace {

constexpr std::chrono::milliseconds kNotifyTimeout{5000};
// While the usable hosts would still give another assignment than the world's, the notice is repeated
// this often.
constexpr std::chrono::milliseconds kRenotifyPeriod{5000};

}  // namespace

HostChangeNotice::HostChangeNotice(boost::asio::io_context& io) : notifier_(io), renotify_timer_(io) {}

bool HostChangeNotice::tell(const SlotKey& coordinator, HorovodHostUpdate update, std::function<void()> again) {
  const SlotKey key = coordinator;
  const auto it = addresses_.find(key);
  if (it == addresses_.end()) {
    log_of(LogSubsys::kRendezvous).debug("{} has published no notification address yet; not told", slot_text(key));
    return false;
  }
  renotify_timer_.expires_after(kRenotifyPeriod);
  renotify_timer_.async_wait([again = std::move(again)](auto ec) {
    if (!ec) again();
  });
  notifier_.notify(it->second, static_cast<long long>(std::time(nullptr)), update, kNotifyTimeout,
                   [key](WorkerNotice n) {
                     if (n.acked)
                       log_of(LogSubsys::kRendezvous).info("told the coordinator {} at {}", slot_text(key), n.address);
                     else
                       spdlog::warn("could not tell the coordinator {} that the hosts changed: {}; the workers "
                                    "learn it at their next reset",
                                    slot_text(key), n.detail);
                   });
  return true;
}

void HostChangeNotice::cancel() { renotify_timer_.cancel(); }

}  // namespace hvrun

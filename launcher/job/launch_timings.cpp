#include "launcher/job/launch_timings.hpp"

#include "common/log.hpp"

namespace hvrun {

std::string timings_text(const LaunchTimings& t, bool any_remote, std::size_t probes_sent,
                         LaunchTimings::Clock::time_point now) {
  using Clock = LaunchTimings::Clock;
  auto since = [](Clock::time_point from, Clock::time_point to) -> std::string {
    if (from == Clock::time_point{} || to == Clock::time_point{}) return "-";
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count()) + " ms";
  };
  return std::string(kHvrunLogPrefix) + "timings: connect " +
         (any_remote ? since(t.start, t.connected) : std::string("local")) +
         ", agents up " + since(t.start, t.agents_up) + ", probe " + since(t.agents_up, t.decided) +
         ", probes sent " + std::to_string(probes_sent) + ", launch to first output " +
         since(t.decided, t.first_output) + ", ranks ran " + since(t.decided, t.ranks_done) + ", teardown " +
         since(t.ranks_done, now) + ", total " + since(t.start, now);
}

}  // namespace hvrun

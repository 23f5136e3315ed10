#pragma once
// When each phase of a launch ended, and the --verbose line that says where a launch spends its time.
#include <chrono>
#include <cstddef>
#include <string>

namespace hvrun {

struct LaunchTimings {
  using Clock = std::chrono::steady_clock;
  // A phase that never ended stays at Clock::time_point{} and shows as "-".
  Clock::time_point start = Clock::now(), connected, agents_up, decided, first_output, ranks_done;
};

// "hvrun: timings: connect 120 ms, agents up 340 ms, probe 80 ms, probes sent 12, launch to first
// output 95 ms, ranks ran 2300 ms, teardown 15 ms, total 2800 ms" as of `now`; connect shows "local"
// when no host is remote.
std::string timings_text(const LaunchTimings& t, bool any_remote, std::size_t probes_sent,
                         LaunchTimings::Clock::time_point now);

}  // namespace hvrun

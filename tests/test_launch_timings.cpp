// The --verbose timings line (launcher/job/launch_timings.hpp).
#include <catch2/catch.hpp>

#include "launcher/job/launch_timings.hpp"

using namespace std::chrono_literals;

TEST_CASE("launch timings: each phase from its start, '-' for phases that never ended", "[launch_timings]") {
  hvrun::LaunchTimings t;
  t.start = hvrun::LaunchTimings::Clock::time_point{} + 1000ms;
  t.connected = t.start + 120ms;
  t.agents_up = t.start + 340ms;
  t.decided = t.start + 420ms;
  t.first_output = t.decided + 95ms;
  t.ranks_done = t.decided + 2300ms;
  const auto now = t.ranks_done + 15ms;
  CHECK(hvrun::timings_text(t, true, 12, now) ==
        "hvrun: timings: connect 120 ms, agents up 340 ms, probe 80 ms, probes sent 12, launch to first output "
        "95 ms, ranks ran 2300 ms, teardown 15 ms, total 2735 ms");
  t.decided = t.first_output = t.ranks_done = {};
  CHECK(hvrun::timings_text(t, false, 0, now) ==
        "hvrun: timings: connect local, agents up 340 ms, probe -, probes sent 0, launch to first output -, "
        "ranks ran -, teardown -, total 2735 ms");
}

// StragglerBoard (launcher/job/straggler_board.hpp): the hosts' observation messages gathered into the
// job's windows: judged when every reporting host has sent its part, or two windows on without a silent
// host, whose ranks then drop out.
#include <catch2/catch.hpp>

#include "launcher/job/straggler_board.hpp"

using hvrun::ObservationMsg;
using hvrun::StragglerBoard;
using namespace std::chrono_literals;

namespace {

// Two ranks on host `host`: waiting `wait` (thousandths), busy the rest.
ObservationMsg part(int host, int wait) {
  return ObservationMsg{2000, {{2 * host, 1000 - wait, 0, wait, 0, 0, 0, 0, 0, "", 0, "", -1, 0}, {2 * host + 1, 1000 - wait, 0, wait, 0, 0, 0, 0, 0, "", 0, "", -1, 0}}};
}

}  // namespace

TEST_CASE("straggler board: a window is judged when every host sent its part, and names the host's ranks") {
  StragglerBoard board(3);
  auto at = StragglerBoard::Clock::time_point{} + 1h;
  std::vector<hvrun::StragglerWatch::Event> events;
  for (int w = 0; w < 3; ++w) {
    CHECK(board.report(0, "lab0", part(0, 800), at).empty());
    CHECK(board.report(1, "lab1", part(1, 20), at + 10ms).empty());
    for (auto& e : board.report(2, "lab2", part(2, 800), at + 20ms)) events.push_back(e);
    at += 2s;
  }
  REQUIRE(events.size() == 2);
  CHECK(events[0].rank == 2);
  CHECK(events[1].rank == 3);
  CHECK(events[0].host == "lab1");
  CHECK_THAT(events[0].text, Catch::StartsWith("rank 2 on lab1 holds the job back: busy 98 %"));
}

TEST_CASE("straggler board: a host that stops reporting does not hold the windows up") {
  StragglerBoard board(3);
  auto at = StragglerBoard::Clock::time_point{} + 1h;
  std::vector<hvrun::StragglerWatch::Event> events;
  // Host 2's ranks ended: it reports once, then never again. Hosts 0 and 1 go on, host 1 slow.
  board.report(2, "lab2", part(2, 800), at);
  for (int w = 0; w < 6; ++w) {
    board.report(0, "lab0", part(0, 800), at);
    for (auto& e : board.report(1, "lab1", part(1, 20), at + 10ms)) events.push_back(e);
    at += 2s;
  }
  REQUIRE_FALSE(events.empty());
  CHECK(events[0].host == "lab1");
}

// Rank-exit accounting (launcher/job/rank_exits.hpp): which host runs which rank, exits reported once,
// ranks gone with their agent, and the failure report's text.
#include <catch2/catch.hpp>

#include <signal.h>

#include "launcher/job/job.hpp"
#include "launcher/job/rank_exits.hpp"

using hvrun::ExitedMsg;
using hvrun::RankExits;

TEST_CASE("rank exits: hosts own their ranks, each exit counts once, a lost host ends its ranks",
          "[rank_exits]") {
  RankExits e(5);
  e.assign(0, 0, 2);
  e.assign(1, 2, 3);
  CHECK(e.size() == 5);
  CHECK(e.host_of(0) == 0);
  CHECK(e.host_of(4) == 1);
  CHECK(e.runs_on(1, 0));
  CHECK_FALSE(e.runs_on(2, 0));
  CHECK_FALSE(e.runs_on(-1, 0));
  CHECK_FALSE(e.runs_on(5, 1));
  CHECK(e.record(3));
  CHECK_FALSE(e.record(3));
  CHECK(e.exited() == 1);
  CHECK(e.running() == 4);
  e.mark_host_exited(1);  // rank 3 already counted
  CHECK(e.exited() == 3);
  CHECK_FALSE(e.all_exited());
  e.mark_host_exited(0);
  CHECK(e.all_exited());
  e.mark_host_exited(0);
  CHECK(e.exited() == 5);
}

TEST_CASE("rank exits: how a failed rank's end reads", "[rank_exits]") {
  const ExitedMsg code{2, 3, 0, ""};
  const ExitedMsg killed{2, 137, SIGKILL, ""};
  const ExitedMsg spawn{2, 127, 0, "cannot execute 'nope': No such file or directory"};
  const ExitedMsg ok{2, 0, 0, ""};
  CHECK(hvrun::describe_exit(code) == "exited with code 3");
  CHECK(hvrun::describe_exit(killed) == "killed by SIGKILL");
  CHECK(hvrun::describe_exit(spawn) == spawn.error);
  CHECK_FALSE(hvrun::exit_failed(ok));
  CHECK(hvrun::exit_failed(code));
  CHECK(hvrun::exit_failed(killed));
  CHECK(hvrun::exit_failed(spawn));
  CHECK(hvrun::failed_rank_exit_code(code) == 3);
  CHECK(hvrun::failed_rank_exit_code(spawn) == hvrun::kExitCannotExecute);

  const std::deque<std::string> tail{"Traceback", "ValueError: bad"};
  CHECK(hvrun::rank_failure_report(code, "lab2", tail, 3) ==
        "hvrun: rank 2 on lab2: exited with code 3; its last stderr lines:\n    Traceback\n    ValueError: bad\n"
        "hvrun: stopping the other 3 ranks");
  CHECK(hvrun::rank_failure_report(spawn, "lab2", tail, 0) == "hvrun: rank 2 on lab2: " + spawn.error);
  CHECK(hvrun::rank_failure_report(killed, "lab2", {}, 1) ==
        "hvrun: rank 2 on lab2: killed by SIGKILL\nhvrun: stopping the other 1 ranks");
}

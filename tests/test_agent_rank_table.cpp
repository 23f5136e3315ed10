// The agent's rank table (agent/rank_table.hpp): which pid is which rank, exit reports made once and
// what they say, and a rank's environment, without a process.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "agent/rank_table.hpp"

using hvrun::RankTable;

TEST_CASE("rank table: slots in start order; each rank's exit is reported once", "[rank_table]") {
  RankTable t;
  CHECK(t.add(4, 1001) == 0);
  CHECK(t.add(5, 1002) == 1);
  CHECK(t.entries().size() == 2);
  CHECK(t.at(1).rank == 5);
  CHECK(t.at(1).pid == 1002);

  CHECK_FALSE(t.reap(999, W_EXITCODE(0, 0)));  // a child that is no rank
  const auto second = t.reap(1002, W_EXITCODE(3, 0));
  REQUIRE(second);
  CHECK(second->slot == 1);
  CHECK(second->exit.rank == 5);
  CHECK(second->exit.exit_code == 3);
  CHECK(t.at(1).reaped);
  CHECK_FALSE(t.at(0).reaped);
  CHECK_FALSE(t.reap(1002, W_EXITCODE(0, 0)));  // reported already
  // A reaped rank stays in the table: its group may still hold what it left behind.
  CHECK(t.entries().size() == 2);
  const auto first = t.reap(1001, W_EXITCODE(0, SIGKILL));
  REQUIRE(first);
  CHECK(first->slot == 0);
  CHECK(first->exit.rank == 4);
}

TEST_CASE("rank table: a restart retires every reaped rank, and only once all are", "[rank_table]") {
  RankTable t;
  t.add(0, 1001);
  t.add(1, 1002);
  t.reap(1001, W_EXITCODE(1, 0));
  CHECK_FALSE(t.retire_all());  // rank 1 still runs
  CHECK(t.entries().size() == 2);
  t.reap(1002, W_EXITCODE(0, SIGTERM));
  CHECK(t.retire_all());
  CHECK(t.entries().empty());
  // The next attempt's ranks take new slots; the old slots still name their ranks (their pipes may
  // still be read), and an old pid that comes again is not taken for a rank.
  CHECK(t.add(0, 2001) == 2);
  CHECK(t.entries().size() == 1);
  CHECK(t.entries()[0].pid == 2001);
  CHECK(t.at(1).rank == 1);
  CHECK_FALSE(t.reap(1002, W_EXITCODE(0, 0)));
  const auto again = t.reap(2001, W_EXITCODE(0, 0));
  REQUIRE(again);
  CHECK(again->slot == 2);
  CHECK(again->exit.rank == 0);
}

TEST_CASE("rank table: exit reports from wait statuses and failed spawns", "[rank_table]") {
  auto e = hvrun::exit_report(2, W_EXITCODE(0, 0));
  CHECK(e.rank == 2);
  CHECK(e.exit_code == 0);
  CHECK(e.signal == 0);
  CHECK(e.error.empty());
  e = hvrun::exit_report(2, W_EXITCODE(42, 0));
  CHECK(e.exit_code == 42);
  CHECK(e.signal == 0);
  e = hvrun::exit_report(7, W_EXITCODE(0, SIGSEGV));
  CHECK(e.rank == 7);
  CHECK(e.signal == SIGSEGV);
  CHECK(e.exit_code == 128 + SIGSEGV);
  e = hvrun::spawn_failure_report(1, "cannot execute 'nope': No such file or directory");
  CHECK(e.rank == 1);
  CHECK(e.exit_code == 127);
  CHECK(e.signal == 0);
  CHECK(e.error == "cannot execute 'nope': No such file or directory");
}

TEST_CASE("rank table: a rank's environment is the launch's with its own over it", "[rank_table]") {
  hvrun::LaunchMsg launch;
  launch.env = {{"PATH", "/usr/bin"}, {"RANK", "x"}, {"A", "1"}};
  hvrun::RankLaunch r;
  r.rank = 3;
  r.env = {{"RANK", "3"}, {"LOCAL_RANK", "1"}};
  CHECK(hvrun::rank_environment(launch, r) ==
        std::vector<std::string>{"A=1", "LOCAL_RANK=1", "PATH=/usr/bin", "RANK=3"});
  CHECK(hvrun::rank_environment(launch, hvrun::RankLaunch{}) ==
        std::vector<std::string>{"A=1", "PATH=/usr/bin", "RANK=x"});
}

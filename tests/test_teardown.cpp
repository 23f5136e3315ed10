// The teardown state machine (launcher/job/teardown.hpp): phases, exit codes, and what a failure or a
// signal makes the job do, without sockets or timers.
#include <catch2/catch.hpp>

#include "launcher/job/job.hpp"
#include "launcher/job/teardown.hpp"

using hvrun::Teardown;
using Phase = Teardown::Phase;
using Action = Teardown::Action;
using namespace std::chrono_literals;

TEST_CASE("teardown: a failure before the launch shuts the agents down, reported once", "[teardown]") {
  Teardown t(3000ms);
  CHECK(t.activity() == "starting the agents");
  t.advance(Phase::kProbing);
  CHECK(t.before_launch());
  const auto d = t.fail();
  CHECK(d.report);
  CHECK(d.action == Action::kShutDown);
  CHECK(t.exit_code() == hvrun::kExitLaunchFailed);
  CHECK(t.failure_reported());
  const auto again = t.fail();  // a second failure is not reported, the action stands
  CHECK_FALSE(again.report);
  CHECK(again.action == Action::kShutDown);
  REQUIRE(t.shut_down());
  CHECK(t.tearing_down());
  CHECK(t.activity() == "shutting down the agents");
  CHECK_FALSE(t.shut_down());
  CHECK_FALSE(t.stop_ranks());
  CHECK(t.fail().action == Action::kNothing);
  CHECK(t.phase() == Phase::kShuttingDown);
}

TEST_CASE("teardown: a failure while ranks run stops them with the kill grace", "[teardown]") {
  Teardown t(3000ms);
  t.advance(Phase::kRunning);
  CHECK_FALSE(t.before_launch());
  const auto d = t.fail();
  CHECK(d.report);
  CHECK(d.action == Action::kStopRanks);
  CHECK(d.grace == 3000ms);
  REQUIRE(t.stop_ranks());
  CHECK(t.phase() == Phase::kStopping);
  CHECK(t.activity() == "stopping the ranks");
  CHECK(t.stop_ranks());  // stopping again (a second signal) is allowed until the shutdown
  t.finish();
  CHECK(t.phase() == Phase::kDone);
  CHECK(t.tearing_down());
}

TEST_CASE("teardown: signals: 128+N first (the autopsy, then the ranks stop with grace), a second takes the "
          "grace away, after the end the output goes",
          "[teardown]") {
  Teardown t(3000ms);
  t.advance(Phase::kRunning);
  auto d = t.on_signal(15);
  CHECK(d.report);
  CHECK(t.exit_code() == 128 + 15);
  CHECK(d.action == Action::kAutopsy);
  CHECK(d.grace == 3000ms);
  CHECK(t.begin_autopsy());
  CHECK_FALSE(t.begin_autopsy());  // once
  t.stop_ranks();
  d = t.on_signal(2);
  CHECK_FALSE(d.report);
  CHECK(t.exit_code() == 128 + 15);  // the first one counts
  CHECK(d.action == Action::kStopRanks);
  CHECK(d.grace == 0ms);
  t.finish();
  CHECK(t.on_signal(2).action == Action::kDropOutput);

  Teardown early(3000ms);
  d = early.on_signal(2);
  CHECK(d.report);
  CHECK(d.action == Action::kShutDown);
  CHECK(early.exit_code() == 130);
}

TEST_CASE("teardown: a failure recorded with its own code is not reported again", "[teardown]") {
  Teardown t(1000ms);
  t.record_failure(hvrun::kExitUsage);
  const auto d = t.fail();
  CHECK_FALSE(d.report);
  CHECK(t.exit_code() == hvrun::kExitUsage);
  Teardown check(1000ms);
  check.set_exit_code(0);
  check.mark_reported();
  CHECK(check.exit_code() == 0);
  CHECK_FALSE(check.on_signal(2).report);
  CHECK(check.exit_code() == 0);
}

TEST_CASE("teardown: a restart is no failure; a signal while the ranks stop for it, or between attempts, ends "
          "the job",
          "[teardown][restarts]") {
  Teardown t(3000ms);
  CHECK_FALSE(t.restart());  // nothing runs yet
  t.advance(Phase::kRunning);
  REQUIRE(t.restart());
  CHECK(t.phase() == Phase::kRestarting);
  CHECK(t.activity() == "stopping the ranks to restart them");
  CHECK_FALSE(t.failure_reported());
  CHECK(t.exit_code() == 0);
  CHECK_FALSE(t.restart());  // a second failure while they stop starts nothing more
  CHECK_FALSE(t.before_launch());
  CHECK(t.on_stall().action == Action::kNothing);
  t.advance(Phase::kRelaunching);
  CHECK(t.before_launch());
  CHECK(t.activity() == "preparing the hosts for a restart");
  t.advance(Phase::kRunning);
  REQUIRE(t.restart());
  // SIGINT while the ranks stop for the restart: they stop with grace, and the job ends 128 + 2.
  const auto d = t.on_signal(2);
  CHECK(d.report);
  CHECK(d.action == Action::kStopRanks);
  CHECK(d.grace == 3000ms);
  CHECK(t.exit_code() == 130);

  Teardown between(3000ms);
  between.advance(Phase::kRunning);
  between.restart();
  between.advance(Phase::kRelaunching);
  const auto s = between.on_signal(15);  // no rank runs: the agents go at once
  CHECK(s.action == Action::kShutDown);
  CHECK(between.exit_code() == 143);
  Teardown lost(3000ms);
  lost.advance(Phase::kRelaunching);
  CHECK(lost.fail().action == Action::kShutDown);
}

// --max-restarts' decisions (launcher/job/restart_plan.hpp) and the rank plan without lost hosts
// (RankPlan::without), without sockets or processes.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "launcher/job/restart_plan.hpp"

using hvrun::HostSpec;
using hvrun::RankPlan;
using hvrun::RestartPlan;

namespace {

const std::vector<std::string> kNames{"a", "b", "c"};

RankPlan three_hosts(int np) { return RankPlan({HostSpec{"a", 2}, HostSpec{"b", 2}, HostSpec{"c", 2}}, np, false); }

}  // namespace

TEST_CASE("restart plan: one budget for the whole job, spent by each restart", "[restarts]") {
  RestartPlan none(0, 4, 0);
  CHECK_FALSE(none.enabled());
  CHECK_FALSE(none.spend());
  RestartPlan two(2, 4, 0);
  CHECK(two.enabled());
  CHECK(two.spend());
  CHECK(two.spend());
  CHECK(two.used() == 2);
  CHECK_FALSE(two.spend());
  CHECK(two.used() == 2);
}

TEST_CASE("restart plan: a rank failure keeps the plan, a lost host's ranks move only where slots hold them",
          "[restarts]") {
  const RankPlan plan = three_hosts(4);  // a:2 (ranks 0,1), b:2 (ranks 2,3), c unused
  {
    INFO("no host lost: the same plan");
    const auto next = RestartPlan(1, 4, 0).next(plan, {false, false, false}, kNames);
    REQUIRE(next.plan);
    CHECK(next.plan->hosts()[1].local_size == 2);
    CHECK(next.plan->size() == 4);
  }
  {
    INFO("a lost, c's idle slots take its ranks: -np stays 4, rank 0 moves to b");
    const auto next = RestartPlan(1, 4, 0).next(plan, {true, false, false}, kNames);
    REQUIRE(next.plan);
    const auto& h = next.plan->hosts();
    CHECK(next.plan->size() == 4);
    CHECK(h[0].local_size == 0);
    CHECK(h[0].slots == 0);
    CHECK(h[1].first_rank == 0);
    CHECK(h[1].local_size == 2);
    CHECK(h[2].first_rank == 2);
    CHECK(h[2].local_size == 2);
    CHECK(next.plan->rank(2).host_index == 2);
    CHECK(next.plan->rank(2).node_rank == 1);
    CHECK(next.plan->rank(3).cross_size == 2);
  }
  {
    INFO("a and b lost: 2 slots for 4 ranks; without --min-np the job cannot restart, and says what to give");
    const auto next = RestartPlan(1, 4, 0).next(plan, {true, true, false}, kNames);
    CHECK_FALSE(next.plan);
    CHECK(next.why_not ==
          "without a, b the hosts have 2 slots, fewer than the job's 4 ranks; give --min-np N to restart with fewer "
          "ranks");
  }
  {
    INFO("with --min-np 2 it goes on with the 2 ranks the slots hold; with --min-np 3 it cannot");
    const auto next = RestartPlan(1, 4, 2).next(plan, {true, true, false}, kNames);
    REQUIRE(next.plan);
    CHECK(next.plan->size() == 2);
    CHECK(next.plan->hosts()[2].first_rank == 0);
    const auto refused = RestartPlan(1, 4, 3).next(plan, {true, true, false}, kNames);
    CHECK_FALSE(refused.plan);
    CHECK(refused.why_not == "without a, b the hosts have 2 slots, fewer than --min-np 3; add hosts, or lower --min-np");
  }
  {
    INFO("a host lost in an earlier restart is not named again");
    const RankPlan shrunk = *RestartPlan(1, 4, 0).next(plan, {true, false, false}, kNames).plan;
    const auto next = RestartPlan(1, 4, 0).next(shrunk, {true, false, true}, kNames);
    CHECK_FALSE(next.plan);
    CHECK_THAT(next.why_not, Catch::StartsWith("without c the hosts have 2 slots"));
  }
  CHECK_THROWS_AS(plan.without({false, false, false}, 7), hvrun::Error);
  CHECK_THROWS_AS(plan.without({false}, 1), hvrun::Error);
}

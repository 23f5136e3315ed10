#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/rank_plan.hpp"

using hvrun::HostSpec;
using hvrun::RankPlan;

namespace {

std::vector<int> local_sizes(const RankPlan& plan) {
  std::vector<int> out;
  for (const auto& h : plan.hosts()) out.push_back(h.local_size);
  return out;
}

std::vector<int> first_ranks(const RankPlan& plan) {
  std::vector<int> out;
  for (const auto& h : plan.hosts()) out.push_back(h.first_rank);
  return out;
}

// Every rank is on exactly one host, the hosts' ranks are contiguous and in host order, and rank()
// agrees with hosts().
void check_consistent(const RankPlan& plan) {
  int next = 0;
  for (std::size_t i = 0; i < plan.hosts().size(); ++i) {
    const auto& h = plan.hosts()[i];
    if (h.local_size > 0) CHECK(h.first_rank == next);
    for (int l = 0; l < h.local_size; ++l) {
      const auto r = plan.rank(next + l);
      CHECK(r.host_index == static_cast<int>(i));
      CHECK(r.local_rank == l);
      CHECK(r.local_size == h.local_size);
      CHECK(r.size == plan.size());
    }
    next += h.local_size;
  }
  CHECK(next == plan.size());
}

}  // namespace

TEST_CASE("ranks fill hosts in order; np <= 0 takes every slot", "[rank_plan]") {
  const RankPlan plan({{"a", 4}, {"b", 4}}, 0, false);
  CHECK(plan.size() == 8);
  CHECK(plan.total_slots() == 8);
  CHECK_FALSE(plan.oversubscribed());
  CHECK(local_sizes(plan) == std::vector<int>{4, 4});
  CHECK(first_ranks(plan) == std::vector<int>{0, 4});
  CHECK(plan.rank(5).host_index == 1);
  CHECK(plan.rank(5).local_rank == 1);
  CHECK(plan.hosts()[1].host == "b");
  check_consistent(plan);
  CHECK(RankPlan({{"a", 4}, {"b", 4}}, -1, false).size() == 8);
}

TEST_CASE("uneven slots", "[rank_plan]") {
  const RankPlan plan({{"a", 3}, {"b", 1}, {"c", 2}}, 0, false);
  CHECK(local_sizes(plan) == std::vector<int>{3, 1, 2});
  CHECK(first_ranks(plan) == std::vector<int>{0, 3, 4});
  check_consistent(plan);
}

TEST_CASE("np below the slots launches np ranks; later hosts may get none", "[rank_plan]") {
  const RankPlan plan({{"a", 4}, {"b", 4}, {"c", 2}}, 5, false);
  CHECK(plan.size() == 5);
  CHECK(local_sizes(plan) == std::vector<int>{4, 1, 0});
  check_consistent(plan);
  CHECK(plan.rank(4).cross_size == 2);  // local rank 0 on a and b only; c is unused

  const RankPlan one({{"a", 4}, {"b", 4}}, 3, false);
  CHECK(local_sizes(one) == std::vector<int>{3, 0});
  CHECK(one.rank(0).cross_size == 1);
  CHECK(one.rank(2).node_rank == 0);
}

TEST_CASE("np above the slots spreads in proportion, contiguous per host", "[rank_plan]") {
  SECTION("-np 16 -H a:4,b:4") {
    const RankPlan plan({{"a", 4}, {"b", 4}}, 16, false);
    CHECK(plan.oversubscribed());
    CHECK(local_sizes(plan) == std::vector<int>{8, 8});
    CHECK(first_ranks(plan) == std::vector<int>{0, 8});
    CHECK(plan.rank(7).host_index == 0);
    CHECK(plan.rank(8).host_index == 1);
    check_consistent(plan);
  }
  SECTION("-np 5 -H a:2,b:1: exact shares 3.33 and 1.67, the remainder to b") {
    const RankPlan plan({{"a", 2}, {"b", 1}}, 5, false);
    CHECK(local_sizes(plan) == std::vector<int>{3, 2});
    check_consistent(plan);
  }
  SECTION("ties go to the earlier host") {
    const RankPlan plan({{"a", 1}, {"b", 1}, {"c", 1}}, 4, false);
    CHECK(local_sizes(plan) == std::vector<int>{2, 1, 1});
    const RankPlan plan5({{"a", 1}, {"b", 1}, {"c", 1}}, 5, false);
    CHECK(local_sizes(plan5) == std::vector<int>{2, 2, 1});
    check_consistent(plan5);
  }
  SECTION("uneven slots") {
    const RankPlan plan({{"a", 3}, {"b", 1}, {"c", 2}}, 10, false);  // 5, 1.67, 3.33
    CHECK(local_sizes(plan) == std::vector<int>{5, 2, 3});
    check_consistent(plan);
  }
  SECTION("every np from the slots up to 40 places exactly np, each host within one of its share") {
    const std::vector<HostSpec> hosts{{"a", 3}, {"b", 1}, {"c", 2}, {"d", 5}};
    for (int np = 11; np <= 40; ++np) {
      const RankPlan plan(hosts, np, false);
      CAPTURE(np);
      check_consistent(plan);
      for (std::size_t i = 0; i < hosts.size(); ++i) {
        const double share = static_cast<double>(np) * hosts[i].slots / 11.0;
        CHECK(plan.hosts()[i].local_size >= static_cast<int>(share));
        CHECK(plan.hosts()[i].local_size <= static_cast<int>(share) + 1);
      }
    }
  }
}

TEST_CASE("--no-oversubscribe turns np above the slots into an error naming both numbers", "[rank_plan]") {
  try {
    RankPlan({{"a", 4}, {"b", 4}}, 16, true);
    FAIL("no error");
  } catch (const hvrun::UsageError& e) {
    CHECK(std::string(e.what()) ==
          "-np 16 exceeds the 8 slots of -H/--hostfile; remove --no-oversubscribe or add slots");
  }
  CHECK(RankPlan({{"a", 4}, {"b", 4}}, 8, true).size() == 8);
  CHECK(RankPlan({{"a", 4}, {"b", 4}}, 0, true).size() == 8);
}

TEST_CASE("cross rank and size as Horovod defines them, on uneven hosts", "[rank_plan]") {
  // a:2, b:1, c:2 → ranks a0 a1 | b0 | c0 c1
  const RankPlan plan({{"a", 2}, {"b", 1}, {"c", 2}}, 0, false);
  check_consistent(plan);
  struct Expect {
    int rank, host, local, cross_rank, cross_size, node;
  };
  const std::vector<Expect> expected{
      {0, 0, 0, 0, 3, 0}, {1, 0, 1, 0, 2, 0}, {2, 1, 0, 1, 3, 1}, {3, 2, 0, 2, 3, 2}, {4, 2, 1, 1, 2, 2},
  };
  for (const auto& e : expected) {
    const auto r = plan.rank(e.rank);
    CAPTURE(e.rank);
    CHECK(r.rank == e.rank);
    CHECK(r.host_index == e.host);
    CHECK(r.local_rank == e.local);
    CHECK(r.cross_rank == e.cross_rank);
    CHECK(r.cross_size == e.cross_size);
    CHECK(r.node_rank == e.node);
  }
}

TEST_CASE("unused hosts count for no cross rank or node rank", "[rank_plan]") {
  // -np 3 -H a:1,b:1,c:1,d:1 leaves d unused; an oversubscribed plan cannot leave holes, so use np < slots.
  const RankPlan plan({{"a", 2}, {"b", 1}, {"c", 3}}, 4, false);  // a0 a1 | b0 | c0
  CHECK(local_sizes(plan) == std::vector<int>{2, 1, 1});
  CHECK(plan.rank(3).cross_rank == 2);
  CHECK(plan.rank(3).cross_size == 3);
  CHECK(plan.rank(3).node_rank == 2);
  CHECK(plan.rank(1).cross_size == 1);

  const RankPlan holes({{"a", 2}, {"b", 2}, {"c", 2}}, 2, false);  // only a
  CHECK(local_sizes(holes) == std::vector<int>{2, 0, 0});
  CHECK(holes.rank(0).cross_size == 1);
  CHECK(holes.rank(1).cross_size == 1);
}

TEST_CASE("rank plan rejects impossible inputs", "[rank_plan]") {
  CHECK_THROWS_AS(RankPlan({}, 2, false), hvrun::UsageError);
  CHECK_THROWS_AS(RankPlan({{"a", 0}}, 0, false), hvrun::UsageError);
  CHECK_THROWS_AS(RankPlan({{"a", 2147483647}, {"b", 1}}, 0, false), hvrun::UsageError);
  const RankPlan plan({{"a", 2}}, 0, false);
  CHECK_THROWS_AS(plan.rank(2), hvrun::Error);
  CHECK_THROWS_AS(plan.rank(-1), hvrun::Error);
}

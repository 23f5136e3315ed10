// StragglerWatch (launcher/job/straggler_watch.hpp): which rank holds a synchronous job back, decided on
// recorded windows of every rank's shares: named after three windows in a row with the cause and the
// figures, recovered after three without, nobody named in a uniform job, a job that slows down as a whole,
// or one whose rank 0 does a little more; one onset line per rank and cause a minute.
#include <catch2/catch.hpp>

#include "launcher/job/straggler_watch.hpp"

using hvrun::RankShares;
using hvrun::StragglerWatch;
using namespace std::chrono_literals;

namespace {

// Six ranks on three hosts, two each: every rank waits `wait` in its collective and computes the rest,
// except where a test changes one.
std::vector<RankShares> job(double wait) {
  std::vector<RankShares> ranks;
  for (int r = 0; r < 6; ++r) {
    RankShares s;
    s.rank = r;
    s.host = "lab" + std::to_string(r / 2);
    s.waiting = wait;
    s.busy = 1 - wait;
    ranks.push_back(s);
  }
  return ranks;
}

// Feeds `windows` copies of `ranks`, 2 s apart from `start`; returns every event and moves `start` on.
std::vector<StragglerWatch::Event> feed(StragglerWatch& watch, const std::vector<RankShares>& ranks, int windows,
                                        StragglerWatch::Clock::time_point& at) {
  std::vector<StragglerWatch::Event> all;
  for (int i = 0; i < windows; ++i) {
    for (auto& e : watch.window(ranks, at)) all.push_back(e);
    at += 2s;
  }
  return all;
}

}  // namespace

TEST_CASE("straggler watch: a rank starved by its cgroup's quota is named within three windows, with the cause "
          "and figures, and said to recover") {
  StragglerWatch watch;
  auto at = StragglerWatch::Clock::time_point{} + 1h;
  CHECK(feed(watch, job(0.1), 5, at).empty());  // uniform: each waits a little
  auto slow = job(0.8);
  slow[2].waiting = 0.02;
  slow[2].busy = 0.6;
  slow[2].starved = 0.38;
  slow[2].cpu_limit = 0.25;
  CHECK(feed(watch, slow, 2, at).empty());  // two windows: not yet
  const auto named = feed(watch, slow, 1, at);
  REQUIRE(named.size() == 1);
  CHECK_FALSE(named[0].recovered);
  CHECK(named[0].rank == 2);
  CHECK(named[0].cause == StragglerWatch::Cause::kStarved);
  CHECK(named[0].text == "rank 2 on lab1 holds the job back: busy 60 % of the last 6 s while the others wait 80 % "
                         "in their collectives; it waited for a CPU 38 % of the time and may use 0.25 of a CPU (its "
                         "cgroup's quota)");
  CHECK(watch.named() == std::vector<int>{2});
  CHECK(feed(watch, slow, 20, at).empty());  // one line, not one per window
  CHECK(feed(watch, job(0.1), 2, at).empty());
  const auto back = feed(watch, job(0.1), 1, at);
  REQUIRE(back.size() == 1);
  CHECK(back[0].recovered);
  CHECK(back[0].text == "rank 2 on lab1 no longer holds the job back (it starved of CPU)");
  CHECK(watch.named().empty());
}

TEST_CASE("straggler watch: a rank held to a quarter of a CPU, as measured on torch DDP: it still waits for the "
          "others' compute part of the time, and is named") {
  // Shares sampled from a 3-rank DDP job on one host, rank 1 in a cpu cgroup of 25 ms per 100 ms.
  std::vector<RankShares> measured(3);
  measured[0] = {0, "h", 0.21, 0.70, 0.0, 0.09, 0, 0, "", 0, ""};
  measured[1] = {1, "h", 0.20, 0.37, 0.0, 0.43, 0.25, 0, "", 0, ""};
  measured[2] = {2, "h", 0.21, 0.71, 0.0, 0.08, 0, 0, "", 0, ""};
  StragglerWatch watch;
  auto at = StragglerWatch::Clock::time_point{} + 1h;
  const auto e = feed(watch, measured, 3, at);
  REQUIRE(e.size() == 1);
  CHECK(e[0].text == "rank 1 on h holds the job back: busy 20 % of the last 6 s while the others wait 71 % in "
                     "their collectives; it waited for a CPU 43 % of the time and may use 0.25 of a CPU (its "
                     "cgroup's quota)");
}

TEST_CASE("straggler watch: a rank that computes more, and one that waits for its own data, each named as such") {
  auto at = StragglerWatch::Clock::time_point{} + 1h;
  {
    StragglerWatch watch;
    auto slow = job(0.7);
    slow[5].waiting = 0.05;
    slow[5].busy = 0.95;
    const auto e = feed(watch, slow, 3, at);
    REQUIRE(e.size() == 1);
    CHECK(e[0].cause == StragglerWatch::Cause::kComputes);
    CHECK(e[0].text == "rank 5 on lab2 holds the job back: busy 95 % of the last 6 s while the others wait 70 % in "
                       "their collectives; it computes more than they do (a slower device or more work on this "
                       "rank)");
  }
  {
    StragglerWatch watch;
    auto slow = job(0.75);
    slow[1].waiting = 0.1;
    slow[1].busy = 0.15;
    slow[1].own_data = 0.75;
    const auto e = feed(watch, slow, 3, at);
    REQUIRE(e.size() == 1);
    CHECK(e[0].cause == StragglerWatch::Cause::kOwnData);
    CHECK(e[0].text == "rank 1 on lab0 holds the job back: waiting for its own data (file reads, the disk, sleeps) "
                       "75 % of the last 6 s while the others wait 75 % in their collectives; look at its data "
                       "loading");
  }
}

TEST_CASE("straggler watch: both ranks of a starved host are named, and no one where no single part holds the "
          "others back") {
  auto at = StragglerWatch::Clock::time_point{} + 1h;
  {
    INFO("one host of two, both its ranks starved (host-wide, no quota)");
    StragglerWatch watch;
    std::vector<RankShares> ranks = {job(0.8)[0], job(0.8)[1], job(0.8)[2], job(0.8)[3]};
    for (int r : {2, 3}) {
      ranks[static_cast<std::size_t>(r)].waiting = 0.05;
      ranks[static_cast<std::size_t>(r)].starved = 0.5;
    }
    const auto e = feed(watch, ranks, 3, at);
    REQUIRE(e.size() == 2);
    CHECK(e[0].rank == 2);
    CHECK(e[1].rank == 3);
    CHECK_THAT(e[0].text, Catch::EndsWith("it waited for a CPU 50 % of the time (the host's CPUs are taken by other "
                                          "work)"));
  }
  {
    INFO("a uniform job that waits much: everyone waits for everyone");
    StragglerWatch watch;
    CHECK(feed(watch, job(0.9), 10, at).empty());
  }
  {
    INFO("the whole job slows down together (a shared file system pause): nobody waits for anybody");
    StragglerWatch watch;
    auto paused = job(0.05);
    for (auto& r : paused) {
      r.busy = 0.05;
      r.own_data = 0.9;
    }
    CHECK(feed(watch, paused, 10, at).empty());
  }
  {
    INFO("rank 0 logs a little more: the others wait 30 %, not most of the time");
    StragglerWatch watch;
    auto ranks = job(0.3);
    ranks[0].waiting = 0.02;
    ranks[0].busy = 0.98;
    CHECK(feed(watch, ranks, 10, at).empty());
  }
  {
    INFO("half the ranks or more 'held back' by the rest: no single part to name");
    StragglerWatch watch;
    auto ranks = job(0.8);
    for (int r : {0, 1, 2, 3}) ranks[static_cast<std::size_t>(r)].waiting = 0.05;
    CHECK(feed(watch, ranks, 10, at).empty());
  }
  {
    INFO("a single rank cannot be compared");
    StragglerWatch watch;
    std::vector<RankShares> one = {job(0.0)[0]};
    CHECK(feed(watch, one, 10, at).empty());
  }
}

TEST_CASE("straggler watch: a rank that comes and goes is named once a minute at most, and only a said onset "
          "gets its recovery") {
  StragglerWatch watch;
  auto at = StragglerWatch::Clock::time_point{} + 1h;
  auto slow = job(0.8);
  slow[4].waiting = 0.0;
  slow[4].busy = 1.0;
  std::size_t onsets = 0, recoveries = 0;
  // Three windows slow, three fine, over and over for two minutes: a new onset every 12 s.
  for (int cycle = 0; cycle < 10; ++cycle) {
    for (const auto& e : feed(watch, slow, 3, at)) (e.recovered ? recoveries : onsets) += 1;
    for (const auto& e : feed(watch, job(0.1), 3, at)) (e.recovered ? recoveries : onsets) += 1;
  }
  CHECK(onsets == 2);  // at 0 s and at 60 s
  CHECK(recoveries == 2);
  INFO("a rank that ends is forgotten without a line");
  feed(watch, slow, 3, at);
  auto without = job(0.1);
  without.erase(without.begin() + 4);
  CHECK(feed(watch, without, 5, at).empty());
  CHECK(watch.named().empty());
}

namespace {

// Six ranks on three hosts in a ring (rank r sends to rank r+1): every connection carries `fast` bytes/s
// except those from or to `slow_host` ("" for none), which carry `slow`; every rank waits 85 %.
std::vector<RankShares> ring(const std::string& slow_host, double fast, double slow) {
  auto ranks = job(0.85);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].send_peer = ranks[(r + 1) % ranks.size()].host;
    if (ranks[r].send_peer == ranks[r].host) ranks[r].send_peer = "";  // on the same host: no link
    ranks[r].send_rate = ranks[r].host == slow_host || ranks[r].send_peer == slow_host ? slow : fast;
  }
  return ranks;
}

}  // namespace

TEST_CASE("straggler watch: a host whose every connection is far slower than the others' is named as a slow "
          "link, with the rates, and said to recover; nothing when the links are alike or the ranks do not wait") {
  auto at = StragglerWatch::Clock::time_point{} + 1h;
  {
    StragglerWatch watch;
    CHECK(feed(watch, ring("", 900e6, 0), 5, at).empty());        // alike
    CHECK(feed(watch, ring("lab2", 900e6, 300e6), 5, at).empty());  // a third slower: not far below
    const auto named = feed(watch, ring("lab2", 900e6, 4.8e6), 3, at);
    REQUIRE(named.size() == 1);
    CHECK(named[0].cause == StragglerWatch::Cause::kLink);
    CHECK(named[0].rank == -1);
    CHECK(named[0].host == "lab2");
    CHECK(named[0].text == "the network link of lab2 holds the job back: its connections (with lab0, lab1) carry "
                           "4.8 MB/s at most, the others' 900 MB/s, while the ranks wait 85 % on peers; check lab2's "
                           "NIC (ethtool: speed, errors) and any shaping on it (tc qdisc)");
    CHECK(feed(watch, ring("lab2", 900e6, 4.8e6), 10, at).empty());  // said once
    const auto back = feed(watch, ring("", 900e6, 0), 3, at);
    REQUIRE(back.size() == 1);
    CHECK(back[0].recovered);
    CHECK(back[0].text == "the network link of lab2 no longer holds the job back");
  }
  {
    StragglerWatch watch;
    auto idle = ring("lab2", 900e6, 4.8e6);
    for (auto& r : idle) {
      r.waiting = 0.1;  // the ranks compute: a slow link that nobody waits for holds nothing back
      r.busy = 0.9;
    }
    CHECK(feed(watch, idle, 5, at).empty());
  }
  {
    StragglerWatch watch;
    auto two = ring("lab2", 900e6, 4.8e6);
    two.resize(4);  // two hosts only: no connection between others to compare with
    for (auto& r : two)
      if (r.send_peer == "lab2" || r.host == "lab2") r.send_peer = "";
    CHECK(feed(watch, two, 5, at).empty());
  }
}

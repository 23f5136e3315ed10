// launcher/elastic/elastic_hosts.hpp and worker_registry.hpp: Horovod elastic's host and round rules as
// pure code, by hand, and the slot assignment against Horovod 0.28.1's own get_host_assignments.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include "hvrun/error.hpp"
#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/worker_registry.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/horovod_site.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Kind = RoundEnd::Kind;

namespace {

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string responses(const std::vector<SlotInfo>& slots) {
  std::string s;
  for (const SlotInfo& x : slots) s += x.host + "=" + x.response() + " ";
  return s;
}

}  // namespace

TEST_CASE("a discovery script's output: HOST or HOST:SLOTS per line, each host once", "[unit][elastic]") {
  CHECK(parse_discovery_output("lab1:2\nlab2\n\n  lab1:2\r\nlab3:1\n", 4, "./d.sh") ==
        std::vector<HostSlots>{{"lab1", 2}, {"lab2", 4}, {"lab3", 1}});
  CHECK(parse_discovery_output("", std::nullopt, "./d.sh").empty());  // no host ready yet: not an error
  CHECK(usage_error([] { parse_discovery_output("lab1:2\nlab2\n", std::nullopt, "./d.sh"); }) ==
        "--host-discovery-script ./d.sh printed 'lab2': a host without slots, and --slots-per-host is not given; "
        "give --slots-per-host N or print lab2:N; print one HOST or HOST:SLOTS per line");
  CHECK_THAT(usage_error([] { parse_discovery_output("lab1:two\n", 1, "d"); }),
             Catch::Contains("printed 'lab1:two': slots that are not a positive number"));
  CHECK_THAT(usage_error([] { parse_discovery_output("lab1:0\n", 1, "d"); }),
             Catch::Contains("slots that are not a positive number"));
  CHECK_THAT(usage_error([] { parse_discovery_output("lab1:2\nlab1:3\n", 1, "d"); }),
             Catch::Contains("printed 'lab1:3': the host again with 3 slots after 2"));
  CHECK_THAT(usage_error([] { parse_discovery_output(":2\n", 1, "d"); }), Catch::Contains("not a host name"));
}

TEST_CASE("slots get ranks host by host, cross ranks per local rank, at most --max-np", "[unit][elastic]") {
  CHECK(responses(assign_slots({{"a", 2}, {"b", 2}}, std::nullopt)) ==
        "a=0,4,0,2,0,2 a=1,4,1,2,0,2 b=2,4,0,2,1,2 b=3,4,1,2,1,2 ");
  CHECK(responses(assign_slots({{"a", 2}, {"b", 2}, {"c", 4}}, 5)) ==
        "a=0,5,0,2,0,3 a=1,5,1,2,0,2 b=2,5,0,2,1,3 b=3,5,1,2,1,2 c=4,5,0,1,2,3 ");
  CHECK(assign_slots({{"a", 2}}, 0).empty());
  CHECK(SlotInfo{}.response() == "-1,-1,-1,-1,-1,-1");
}

TEST_CASE("the slot assignment is Horovod 0.28.1's own", "[integration][elastic]") {
  const auto site = hvrun::test::horovod_site();
  if (!site) {
    WARN(hvrun::test::horovod_missing());
    return;
  }
  const std::vector<std::pair<std::vector<HostSlots>, std::optional<int>>> cases = {
      {{{"a", 2}, {"b", 2}}, std::nullopt}, {{{"a", 2}, {"b", 2}, {"c", 4}}, 5}, {{{"a", 4}, {"b", 1}, {"c", 3}}, std::nullopt},
      {{{"a", 1}, {"b", 3}, {"c", 2}, {"d", 2}}, 7}, {{{"a", 8}}, 3}};
  std::string program = "from horovod.runner.common.util import hosts\n";
  for (const auto& [list, max_np] : cases) {
    program += "print(' '.join(s.hostname + '=' + s.to_response_string() for s in hosts.get_host_assignments([";
    for (const HostSlots& h : list) program += "hosts.HostInfo('" + h.host + "', " + std::to_string(h.slots) + "),";
    program += "], 1, " + (max_np ? std::to_string(*max_np) : "None") + ")) + ' ')\n";
  }
  auto r = hvrun::test::run({hvrun::test::kDebianPython, "-c", program}, 60s, {"PYTHONPATH=" + *site});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  for (const auto& [list, max_np] : cases) {
    std::string line;
    REQUIRE(std::getline(lines, line));
    CHECK(responses(assign_slots(list, max_np)) == line);
  }
}

TEST_CASE("hosts: what changed, the order that keeps old hosts' ranks, blacklisting and its cooldown",
          "[unit][elastic]") {
  const auto t0 = ElasticHosts::Clock::time_point{} + 1000s;
  ElasticHosts hosts(std::make_pair(10, 100), [] { return 0.5; });
  CHECK(hosts.update({{"a", 2}, {"b", 2}}, t0) == HorovodHostUpdate::kAdded);
  CHECK(hosts.update({{"b", 2}, {"a", 2}}, t0) == HorovodHostUpdate::kNoUpdate);
  CHECK(hosts.update({{"c", 1}, {"a", 2}, {"b", 2}}, t0) == HorovodHostUpdate::kAdded);
  CHECK(hosts.available() == std::vector<HostSlots>{{"a", 2}, {"b", 2}, {"c", 1}});  // new hosts after old ones
  CHECK(hosts.update({{"c", 1}, {"b", 3}}, t0) == HorovodHostUpdate::kMixed);     // a gone, b grew
  CHECK(hosts.update({{"c", 1}, {"b", 1}}, t0) == HorovodHostUpdate::kRemoved);
  CHECK(hosts.update({{"c", 1}, {"b", 1}, {"a", 2}}, t0) == HorovodHostUpdate::kAdded);
  CHECK(hosts.available() == std::vector<HostSlots>{{"b", 1}, {"c", 1}, {"a", 2}});
  CHECK(hosts.available_slots() == 4);

  // Blacklisted: out of the order at once; back after 10 * 2^1 + 0.5 * 10 = 25 s, at the end.
  hosts.blacklist("b", t0);
  CHECK(hosts.blacklisted("b"));
  CHECK(hosts.cooldown_end("b") == t0 + 25s);
  CHECK(hosts.available() == std::vector<HostSlots>{{"c", 1}, {"a", 2}});
  hosts.blacklist("b", t0 + 5s);  // again while cooling down: the period stands
  CHECK(hosts.cooldown_end("b") == t0 + 25s);
  CHECK(hosts.update({{"c", 1}, {"b", 1}, {"a", 2}}, t0 + 24s) == HorovodHostUpdate::kNoUpdate);
  CHECK(hosts.update({{"c", 1}, {"b", 1}, {"a", 2}}, t0 + 25s) == HorovodHostUpdate::kAdded);
  CHECK_FALSE(hosts.blacklisted("b"));
  CHECK(hosts.available() == std::vector<HostSlots>{{"c", 1}, {"a", 2}, {"b", 1}});
  // The second time: 10 * 2^2 + 5 = 45 s; the range caps it.
  hosts.blacklist("b", t0 + 30s);
  CHECK(hosts.cooldown_end("b") == t0 + 75s);
  ElasticHosts capped(std::make_pair(60, 100), [] { return 0.9; });
  capped.blacklist("x", t0);
  CHECK(capped.cooldown_end("x") == t0 + 100s);

  // Without --blacklist-cooldown-range a blacklisted host never comes back.
  ElasticHosts forever(std::nullopt, [] { return 0.0; });
  forever.update({{"a", 1}, {"b", 1}}, t0);
  forever.blacklist("a", t0);
  CHECK_FALSE(forever.cooldown_end("a"));
  CHECK(forever.update({{"a", 1}, {"b", 1}}, t0 + 10000s) == HorovodHostUpdate::kNoUpdate);
  CHECK(forever.update({{"b", 1}, {"a", 1}, {"c", 1}}, t0 + 10000s) == HorovodHostUpdate::kAdded);
  CHECK(forever.available() == std::vector<HostSlots>{{"b", 1}, {"c", 1}});
}

TEST_CASE("rounds: a reset after failures, success and total failure end the job, the reset limit", "[unit][elastic]") {
  WorkerRegistry reg(1);
  reg.reset(4);
  CHECK(reg.round() == 1);
  CHECK_FALSE(reg.record("a", 0, WorkerState::kReady, false));
  CHECK_FALSE(reg.record("a", 1, WorkerState::kReady, false));
  CHECK_FALSE(reg.record("b", 0, WorkerState::kReady, false));
  CHECK_FALSE(reg.record("a", 0, WorkerState::kReady, false));     // repeated: ignored
  CHECK_FALSE(reg.record("b", 0, WorkerState::kFailure, false));   // READY, then failed: counts once
  CHECK_FALSE(reg.record("c", 0, WorkerState::kFailure, true));    // a blacklisted host: ignored
  auto end = reg.record("b", 1, WorkerState::kFailure, false);
  REQUIRE(end);
  CHECK(end->kind == Kind::kReset);
  CHECK(end->blacklist == std::vector<std::string>{"b"});
  CHECK(end->failed == std::vector<std::pair<std::string, int>>{{"b", 0}, {"b", 1}});
  CHECK(reg.resets() == 1);

  reg.reset(2);
  reg.record("a", 0, WorkerState::kReady, false);
  end = reg.record("c", 0, WorkerState::kFailure, false);
  REQUIRE(end);
  CHECK(end->kind == Kind::kResetLimit);
  CHECK(end->why == "--reset-limit 1 reached: the job was reset 1 time already, so it ends here");

  WorkerRegistry unlimited(std::nullopt);
  unlimited.reset(3);
  unlimited.record("a", 0, WorkerState::kFailure, false);
  unlimited.record("b", 0, WorkerState::kSuccess, false);
  end = unlimited.record("c", 0, WorkerState::kReady, false);
  REQUIRE(end);
  CHECK(end->kind == Kind::kSucceeded);
  CHECK(end->failed == std::vector<std::pair<std::string, int>>{{"a", 0}});  // the exit code says it

  unlimited.reset(2);
  unlimited.record("a", 0, WorkerState::kFailure, false);
  end = unlimited.record("b", 0, WorkerState::kFailure, false);
  REQUIRE(end);
  CHECK(end->kind == Kind::kAllFailed);
  CHECK(end->why == "all 2 workers failed");

  // One failure on each host: every host of the round is blacklisted.
  unlimited.reset(4);
  unlimited.record("a", 0, WorkerState::kReady, false);
  unlimited.record("a", 1, WorkerState::kFailure, false);
  unlimited.record("b", 0, WorkerState::kFailure, false);
  end = unlimited.record("b", 1, WorkerState::kReady, false);
  REQUIRE(end);
  CHECK(end->kind == Kind::kAllBlacklisted);
  CHECK(end->blacklist == std::vector<std::string>{"a", "b"});
}

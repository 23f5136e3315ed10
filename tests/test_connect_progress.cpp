// What the start-up says about the job's hosts (launcher/start/connect_progress.hpp) and how the probe
// round goes on the wire (launcher/job/probe_messages.hpp), on hand-made hosts.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "launcher/job/probe_messages.hpp"
#include "launcher/start/connect_progress.hpp"

using hvrun::JobHost;
using namespace std::chrono_literals;

namespace {

// `up`: its agent said hello and ready; else, with an `error`, its start failed; else it is attached and
// its hello awaited, or (`connecting`) still being started.
JobHost host(const std::string& name, bool up, const std::string& error = "", bool connecting = false) {
  JobHost h;
  h.name = name;
  if (!error.empty()) {
    h.life.fail_start();
    h.connect_error = error;
  } else if (!connecting) {
    h.life.attach();
  }
  if (up) {
    hvrun::InterfaceInfo eth;
    eth.name = "eth0";
    eth.addresses = {"10.0.0." + std::to_string(name.size())};
    eth.prefix_lengths = {24};
    eth.up = eth.running = true;
    eth.speed_mbps = 1000;
    h.hello = hvrun::HelloMsg{"v", name + ".lab", 1, 2, 4000 + static_cast<int>(name.size()), {eth}, "", "", name};
    h.life.greet();
    h.life.ready(false, false);
  }
  return h;
}

}  // namespace

TEST_CASE("connect progress: counts, pending hosts, failures and missing agents", "[connect_progress]") {
  std::vector<JobHost> hosts;
  hosts.push_back(host("a", true));
  hosts.push_back(host("bb", false, "bb: ssh: connection refused"));
  hosts.push_back(host("ccc", false, "", true));
  const auto p = hvrun::start_progress(hosts, 1500ms);
  CHECK(p.hosts == 3);
  CHECK(p.connected == 1);
  CHECK(p.agents_up == 1);
  CHECK(p.pending == std::vector<std::string>{"ccc"});
  CHECK(p.elapsed == 1500ms);
  CHECK(hvrun::connect_failures(hosts) == "cannot start the job on 1 of 3 hosts:\n    bb: ssh: connection refused");
  CHECK(hvrun::agents_missing(hosts) == "ccc");
  hosts[1] = host("bb", false);
  CHECK_FALSE(hvrun::connect_failures(hosts).has_value());
  CHECK(hvrun::agents_missing(hosts) == "bb, ccc");
  // A local agent has no stderr tail to quote.
  CHECK(hvrun::agent_loss_reason(hosts[0], "") == "it exited");
  CHECK(hvrun::agent_loss_reason(hosts[0], "no answer for 4 s") == "no answer for 4 s");
}

TEST_CASE("start check: a host in its login shell waits up to 10 x --start-timeout; others are stuck at once",
          "[connect_progress]") {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<JobHost> hosts;
  hosts.push_back(host("a", true));
  hosts.push_back(host("slow", false, "", true));
  hosts.back().shell_since = t0;
  hosts.push_back(host("late", false, "", true));
  hosts.back().shell_since = t0 + 20s;

  // At the start deadline, both shells run: no give-up, a look again when the first runs out.
  auto c = hvrun::check_start(hosts, t0 + 30s, 30s);
  CHECK_FALSE(c.give_up);
  CHECK(c.recheck == 270s);
  const auto p = hvrun::start_progress(hosts, 30s, t0 + 30s);
  CHECK(p.in_shell == std::vector<std::string>{"slow", "late"});
  CHECK(p.longest_shell == 30s);
  CHECK(p.pending.empty());

  // The first shell runs out; the other is named stuck only when its own does.
  c = hvrun::check_start(hosts, t0 + 300s, 30s);
  REQUIRE(c.give_up);
  CHECK(*c.give_up == "agents did not start within 300 s (10 x --start-timeout) of their host's login shell on 1 host:"
                      "\n    slow: its login shell has run for 300 s and hvrun-agent has not started; time it with: "
                      "ssh slow true");

  // A host still connecting (no shell yet) is stuck at the deadline, as before.
  hosts.push_back(host("dark", false, "", true));
  c = hvrun::check_start(hosts, t0 + 30s, 30s);
  REQUIRE(c.give_up);
  CHECK(*c.give_up == "agents did not start within 30 s on: dark; raise --start-timeout or check those hosts");

  // Everyone up: nothing to wait for.
  std::vector<JobHost> up;
  up.push_back(host("a", true));
  c = hvrun::check_start(up, t0, 30s);
  CHECK_FALSE(c.give_up);
  CHECK(c.recheck == 0s);
}

TEST_CASE("login shell times: median and slowest from the hosts, whose sessions may be gone already",
          "[connect_progress]") {
  std::vector<JobHost> hosts;
  hosts.push_back(host("a", true));
  hosts.push_back(host("bb", true));
  hosts.push_back(host("ccc", true));
  CHECK_FALSE(hvrun::shell_times_text(hosts));  // local hosts and agent commands have no login shell time
  hosts[0].shell_time = 40ms;
  hosts[1].shell_time = 900ms;
  hosts[2].shell_time = 60ms;
  // No host holds a session (JobHost::remote): the job releases each one once its agent has ended, and
  // the times are still there for the --verbose timings at the end.
  const auto text = hvrun::shell_times_text(hosts);
  REQUIRE(text);
  CHECK(*text == "login shells (exec request to the agent's first bytes): median 0.06 s, slowest bb 0.9 s");
}

TEST_CASE("probe messages: members, requests in job indices, results back in member indices",
          "[connect_progress]") {
  std::vector<JobHost> hosts;
  hosts.push_back(host("a", true));
  hosts.push_back(host("bb", false, "no ssh"));
  hosts.push_back(host("ccc", true));
  auto members = hvrun::probe_members(hosts);
  CHECK(members.hosts == std::vector<std::size_t>{0, 2});
  REQUIRE(members.inventories.size() == 2);
  CHECK(members.inventories[1].hostname == "ccc.lab");
  CHECK(hvrun::probe_scope(0, 10) == "every pair");
  CHECK(hvrun::probe_scope(3, 4) == "every pair");
  CHECK(hvrun::probe_scope(3, 5) == "each host from 3+ peers");

  const hvrun::ProbeRound round(members.hosts, members.inventories, hvrun::NicFilter{}, false, 0, true);
  const auto requests = hvrun::probe_requests(round, round.planned(), hosts, 700ms);
  REQUIRE(requests.size() == 2);
  for (std::size_t m = 0; m < 2; ++m) {
    CHECK(requests[m].timeout_ms == 700);
    REQUIRE(requests[m].targets.size() == 1);
    const auto& t = requests[m].targets[0];
    const std::size_t other = m == 0 ? 2 : 0;  // each probes the other member, named by its job index
    CHECK(t.host == static_cast<int>(other));
    CHECK(t.port == hosts[other].hello->probe_port);
  }

  const std::string peer = "agent on ccc";
  const auto r =
      hvrun::probe_result(round, hosts, 2, hvrun::ProbeResultMsg{0, "eth0", "10.0.0.1", hvrun::ProbeOutcome::kWrongHost, 2, 12, ""}, peer);
  CHECK(r.from == 1);
  CHECK(r.to == 0);
  CHECK(r.outcome == hvrun::ProbeOutcome::kWrongHost);
  CHECK(r.answered_as == "ccc");
  CHECK(r.elapsed == 12ms);
  using Msg = hvrun::ProbeResultMsg;
  CHECK_THROWS_WITH(hvrun::probe_result(round, hosts, 2, Msg{5, "", "", hvrun::ProbeOutcome::kOk, -1, 0, ""}, peer),
                    "agent on ccc: probe result for an unknown host");
  CHECK_THROWS_WITH(hvrun::probe_result(round, hosts, 2, Msg{1, "", "", hvrun::ProbeOutcome::kOk, -1, 0, ""}, peer),
                    "bb: probe result about a host without an agent");
  // An outcome of no known word is refused where the message is decoded.
  CHECK_THROWS_WITH(hvrun::decode_control(R"({"type":"probe_result","host":0,"iface":"","address":"",)"
                                          R"("outcome":"maybe","answered_as":-1,"elapsed_ms":0,"detail":""})",
                                          peer),
                    "agent on ccc: unknown probe outcome 'maybe'");
}

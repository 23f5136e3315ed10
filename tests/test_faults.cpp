// The fault catalogue on a network-namespace lab (tests/support/fault_job.hpp): hvrun runs on lab host 0
// and its ranks on hosts 1 and 2 over SSH. For each fault: hvrun's exit code, its one-line cause naming
// host and rank, teardown of every rank everywhere within the kill grace plus a second, no rank and no
// agent left (ranks are found by a marker in their environment, agents by the pids hvrun --verbose
// names), and hvrun's peak memory. Needs root; without it the case says why it skips. The stacks a crash
// or a hang shows: test_faults_stacks.cpp.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/fault_job.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("fault catalogue: every fault ends the job cleanly, says why, and leaves nothing", "[lab][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string sleep_on = "echo ready; exec sleep 60";

  {
    INFO("a rank exits non-zero: its code is hvrun's, its last stderr lines are shown, the rest stop");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 3 ]; then " + job.wait_trigger() +
                      "echo last-words-of-3 >&2; exit 3; fi; exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("rank 3 on " + h2 + ": exited with code 3; its last stderr lines:\n    "
                                      "last-words-of-3"));
    CHECK_THAT(r.err, Catch::Contains("stopping the other 3 ranks"));
    CHECK(job.last_teardown < kGrace + 1s + kTriggerPoll);
  }
  {
    INFO("a rank killed by SIGKILL is named by its signal");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 1 ]; then " + job.wait_trigger() + "kill -KILL $$; fi; " +
                      "exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 137);
    CHECK_THAT(r.err, Catch::Contains("rank 1 on " + h1 + ": killed by SIGKILL, sent from outside hvrun (not by the "
                                      "OOM killer: the kernel log has no OOM kill of it)"));
    CHECK(job.last_teardown < kGrace + 1s + kTriggerPoll);
  }
  {
    INFO("a rank killed by SIGSEGV is named by its signal, with its last stderr lines");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 2 ]; then " + job.wait_trigger() +
                      "echo about-to-crash >&2; kill -SEGV $$; fi; exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 139);
    CHECK_THAT(r.err, Catch::Contains("rank 2 on " + h2 + ": killed by SIGSEGV; its last stderr lines:\n    "
                                      "about-to-crash"));
    CHECK(job.last_teardown < kGrace + 1s + kTriggerPoll);
  }
  {
    INFO("a rank's child that outlives the rank, ignoring SIGTERM and holding stdout, dies with the group");
    FaultJob job(lab, home);
    job.start({}, "sh -c \"trap '' TERM; while :; do sleep 1; done\" & echo ready; " + job.wait_trigger() + "exit 0");
    REQUIRE(wait_for_marker_count(job.marker, 8, 5s) >= 8);  // 4 ranks, each with its child and a sleep
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 0);
    CHECK(job.last_teardown < kGrace + 1s + kTriggerPoll);
  }
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("hvrun gets signal " << sig << ": every rank everywhere is stopped, exit 128+signal");
    FaultJob job(lab, home);
    job.start({}, sleep_on);
    job.mark();
    job.hvrun->signal(sig);
    auto r = job.finish();
    CHECK(r.exit_code == 128 + sig);
    CHECK_THAT(r.err, Catch::Contains(sig == SIGINT ? "received SIGINT; stopping all ranks, once their stacks are "
                                                      "in (a second SIGINT stops them at once)"
                                                    : "received SIGTERM; stopping all ranks, once their stacks are "
                                                      "in (a second SIGTERM stops them at once)"));
    // Every rank has a stack; a rank still starting its sleep may be elsewhere than the others.
    CHECK_THAT(r.err, Catch::Contains("hvrun: where the 4 running ranks are:\nhvrun: rank"));
    CHECK_THAT(r.err, Catch::Contains("clock_nanosleep"));
    CHECK(job.last_teardown < kGrace + 1s);
  }
  {
    INFO("hvrun gets SIGTERM while ranks ignore it: SIGKILL after the grace");
    FaultJob job(lab, home);
    job.start({}, "trap '' TERM; echo ready; while :; do sleep 0.1; done");
    job.mark();
    job.hvrun->signal(SIGTERM);
    auto r = job.finish();
    CHECK(r.exit_code == 143);
    CHECK(job.last_teardown >= kGrace);
    CHECK(job.last_teardown < kGrace + 1s);
  }
  {
    INFO("a second Ctrl-C stops at once: ranks that ignore SIGTERM get no grace");
    FaultJob job(lab, home);
    job.start({}, "trap '' TERM; echo ready; while :; do sleep 0.1; done");
    job.mark();
    job.hvrun->signal(SIGINT);
    job.hvrun->pump_for(100ms);
    job.hvrun->signal(SIGINT);
    auto r = job.finish();
    CHECK(r.exit_code == 128 + SIGINT);
    CHECK(job.last_teardown < kGrace);
  }
  {
    INFO("hvrun killed by SIGKILL: its agents see the SSH channel close and kill every rank");
    FaultJob job(lab, home);
    job.start({}, sleep_on);
    REQUIRE(wait_for_marker_count(job.marker, 4, 5s) >= 4);
    job.kill_hvrun();
    CHECK(since(job.t0) < kGrace + 2s);
  }
  {
    INFO("an agent killed on a remote host: hvrun names the host, its ranks die with it, the rest stop");
    FaultJob job(lab, home);
    job.start({}, sleep_on);
    REQUIRE(job.agents.count(h2) == 1);
    job.mark();
    REQUIRE(::kill(job.agents.at(h2), SIGKILL) == 0);
    auto r = job.finish();
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("lost the agent on " + h2));
    CHECK(job.last_teardown < kGrace + 1s);
  }
  {
    INFO("a host cut off mid-run (all its packets dropped): named after one heartbeat timeout; its own agent "
         "kills its ranks when it hears nothing either");
    FaultJob job(lab, home);
    job.start({"--heartbeat-timeout", "2"}, sleep_on);
    // Host 2's agent has its own heartbeat watchdog (2 s) and kills its ranks.
    ChildResult r = job.cut_off(2, 4s);
    CHECK_THAT(r.err, Catch::Contains(h2) && Catch::Contains("no answer for 2 s"));
    CHECK(job.last_teardown < 2s + kGrace + 1s);
  }
  {
    INFO("sshd on a host stops before start-up: the host and the refusal are named, the other agent is stopped");
    REQUIRE(lab.control({"ssh-stop", "2"}) == 0);
    FaultJob job(lab, home);
    job.mark();
    job.start({}, sleep_on, 0);
    auto r = job.finish(60s);
    lab.control({"ssh-start", "2"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("cannot start the job on 1 of 2 hosts"));
    CHECK_THAT(r.err, Catch::Contains(h2 + ": connection refused"));
    CHECK(count_of(r.out, "ready") == 0);
  }
  {
    INFO("the start timeout expires with one agent up: the silent host is named, the agent that was up is stopped");
    REQUIRE(lab.control({"cut", "2"}) == 0);
    FaultJob job(lab, home);
    job.mark();
    job.start({"--start-timeout", "3", "--ssh-connect-timeout", "30"}, sleep_on, 0);
    auto r = job.finish(60s);
    lab.control({"uncut", "2"});
    job.agents = agent_pids(r.err);
    CHECK(job.agents.count(h1) == 1);  // it was up, and finish() above found it gone
    CHECK(agents_left(job.agents, 1s).empty());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("agents did not start within 3 s on: " + h2));
    CHECK_THAT(r.err, Catch::Contains("raise --start-timeout"));
    CHECK(job.last_teardown < 3s + 1s + kGrace);
  }
  {
    INFO("a rank closes its stdout and keeps running: the job waits for it");
    FaultJob job(lab, home);
    job.mark();
    job.start({}, "exec >&-; sleep 1; echo still-here-$HVRUN_RANK >&2; exit 0", 0);
    auto r = job.finish();
    CHECK(r.exit_code == 0);
    for (int rank = 0; rank < 4; ++rank)
      CHECK_THAT(r.err, Catch::Contains("[" + std::to_string(rank) + "]<stderr>:still-here-" + std::to_string(rank)));
    CHECK(job.last_teardown >= 1s);
  }
  {
    INFO("a huge line without a newline and binary bytes pass through whole, in bounded memory");
    FaultJob job(lab, home);
    job.mark();
    job.start({"-np", "1"}, "head -c 3000000 /dev/zero | tr '\\0' x; printf 'bin:\\001\\002\\377\\000:end'", 0);
    auto r = job.finish();
    CHECK(r.exit_code == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), 'x') == 3000000);
    // Long lines are cut into 64 KiB pieces, each behind its prefix; the bytes themselves are unchanged.
    CHECK(count_of(r.out, "[0]<stdout>:") == 3000000 / (64 * 1024) + 1);
    CHECK_THAT(r.out, Catch::Contains(std::string("bin:\x01\x02\xff\x00:end\n", 13)));
  }
  {
    INFO("ranks flood output while hvrun's stdout is not read for longer than the heartbeat timeout: the ranks "
         "wait (back-pressure, said once), the job survives, nothing is lost, memory stays bounded");
    FaultJob job(lab, home);
    constexpr int kLines = 200000;  // 33 bytes each: 6.6 MB per rank, far above every window
    const std::string line = "0123456789abcdef0123456789abcdef";
    job.start({"--heartbeat-timeout", "1"},
              "echo ready; yes " + line + " | head -n " + std::to_string(kLines), 4);
    job.hvrun->hold_stdout(true);
    job.hvrun->pump_for(4s);  // four heartbeat periods with stdout full
    job.mark();
    auto r = job.finish(120s);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("back-pressure"));
    CHECK(count_of(r.err, "back-pressure") == 1);
    for (int rank = 0; rank < 4; ++rank)
      CHECK(count_of(r.out, "[" + std::to_string(rank) + "]<stdout>:" + line + "\n") == kLines);
  }
  {
    INFO("a missed probe is not a verdict: h2's fabric drops each source's first SYN; the launch probes again, runs");
    const std::string fabric2 = lab.list("LAB_FABRIC_IFACES").at(2);
    for (const char* tool : {"iptables", "ip6tables"}) {
      // Connections to sshd pass; of the others, a source's first SYN is dropped, later ones pass.
      REQUIRE(run(lab.on_host(2, {tool, "-I", "INPUT", "1", "-i", fabric2, "-p", "tcp", "--syn", "!", "--dport",
                                  lab.var("LAB_PORT"), "-m", "recent", "--name", "hvfirst", "--set", "-j", "DROP"}),
                  10s).exit_code == 0);
      REQUIRE(run(lab.on_host(2, {tool, "-I", "INPUT", "1", "-i", fabric2, "-p", "tcp", "--syn", "!", "--dport",
                                  lab.var("LAB_PORT"), "-m", "recent", "--name", "hvfirst", "--rcheck", "-j", "ACCEPT"}),
                  10s).exit_code == 0);
    }
    auto r = run(hvrun_on(lab, home, {"--verbose", "--probe-timeout", "0.5", "-H", h1 + "," + h2, "sh", "-c",
                                      "echo on $HVRUN_IFACE"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("again (attempt 2 of 3, timeout 1 s)"));
    CHECK_THAT(r.out, Catch::Contains("[1]<stdout>:on " + fabric2));
    CHECK(r.max_rss_kib < kMaxRssKib);
    CHECK_FALSE(has_crash_text(r.err));
    for (const char* tool : {"iptables", "ip6tables"})
      for (int rule = 0; rule < 2; ++rule) run(lab.on_host(2, {tool, "-D", "INPUT", "1"}), 10s);
  }
}

TEST_CASE("fault catalogue: a rank killed by the OOM killer in a cgroup with a small memory limit", "[lab][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  MemoryCgroup cgroup(96L << 20);
  if (!cgroup.unavailable.empty()) {
    WARN("skipped: " << cgroup.unavailable);
    return;
  }
  Lab lab(3);
  TempHome home;
  FaultJob job(lab, home);
  job.start({}, "echo ready; if [ $HVRUN_RANK = 1 ]; then " + job.wait_trigger() +
                    "exec /usr/bin/python3 -c 'import itertools; x = [bytearray(10**7) for _ in itertools.count()]'; fi; "
                    "exec sleep 60");
  const auto pids = rank_processes(job.marker, 1);
  REQUIRE_FALSE(pids.empty());
  for (const pid_t p : pids) cgroup.add(p);
  job.fire();
  auto r = job.finish();
  CHECK(r.exit_code == 137);
  CHECK_THAT(r.err, Catch::Contains("hvrun: rank 1 on " + lab.host(1) + ": killed by SIGKILL, sent by the kernel's "
                                    "OOM killer (its memory cgroup's limit was reached; anon-rss "));
  CHECK_THAT(r.err, Catch::Matches("[\\s\\S]*kB\\); peak RSS [0-9]+ MiB[\\s\\S]*"));
}

namespace {

// The session id of `pid` (/proc/PID/stat field 6); 0 when it is gone.
pid_t session_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string state, ppid, pgrp, session;
  rest >> state >> ppid >> pgrp >> session;
  return static_cast<pid_t>(std::atol(session.c_str()));
}

}  // namespace

TEST_CASE("fault catalogue: what a rank detached (setsid, a double fork) ends with the job, however it ends",
          "[lab][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  // Each rank leaves two helpers in sessions of their own: one setsid'd (still the rank's child), one
  // double-forked (its parent gone at once, so it is orphaned), both with stdio away from the rank's.
  const std::string helpers = "setsid sleep 300 </dev/null >/dev/null 2>&1 & "
                              "sh -c 'setsid sleep 301 </dev/null >/dev/null 2>&1 &'; ";
  const auto helpers_running = [&](FaultJob& job) {
    // The ranks' two sessions (an agent's per host) and the helpers' 8, once every setsid has run.
    const auto deadline = Clock::now() + 10s;
    std::set<pid_t> sessions;
    while (sessions.size() < 2 + 8 && Clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);
      sessions.clear();
      for (const pid_t p : processes_with_marker(job.marker)) sessions.insert(session_of(p));
    }
    REQUIRE(sessions.size() == 2 + 8);
  };
  {
    INFO("success: every rank exits 0, their helpers still run");
    FaultJob job(lab, home);
    job.start({}, helpers + "echo ready; " + job.wait_trigger() + "exit 0");
    helpers_running(job);
    job.fire();
    auto r = job.finish();  // nothing with the marker left on any host
    CHECK(r.exit_code == 0);
  }
  {
    INFO("a failed rank");
    FaultJob job(lab, home);
    job.start({}, helpers + "echo ready; if [ $HVRUN_RANK = 3 ]; then " + job.wait_trigger() +
                      "exit 3; fi; exec sleep 60");
    helpers_running(job);
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 3);
    CHECK(job.last_teardown < kGrace + 1s + kTriggerPoll);
  }
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("hvrun gets signal " << sig);
    FaultJob job(lab, home);
    job.start({}, helpers + "echo ready; exec sleep 60");
    helpers_running(job);
    job.mark();
    job.hvrun->signal(sig);
    auto r = job.finish();
    CHECK(r.exit_code == 128 + sig);
    CHECK(job.last_teardown < kGrace + 1s);
  }
  {
    INFO("hvrun killed by SIGKILL");
    FaultJob job(lab, home);
    job.start({}, helpers + "echo ready; exec sleep 60");
    helpers_running(job);
    job.kill_hvrun();
  }
  {
    INFO("a host cut off: its agent hears nothing for the heartbeat timeout and ends everything there");
    FaultJob job(lab, home);
    job.start({"--heartbeat-timeout", "2"}, helpers + "echo ready; exec sleep 60");
    helpers_running(job);
    job.cut_off(2, 4s);
  }
}

TEST_CASE("fault catalogue: a host whose login shell alone is slow is waited for, timed, and named when it runs out",
          "[lab][faults][timing]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  REQUIRE(lab.control({"slow-shell", "2", "5"}) == 0);
  {
    INFO("a 5 s shell under --start-timeout 2: still connecting at 2 s, it is in its shell: the job waits and runs");
    FaultJob job(lab, home);
    job.mark();
    job.start({"--start-timeout", "2"}, "echo ready-$HVRUN_RANK", 0);
    auto r = job.finish(60s);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:ready-") == 4);
    CHECK_THAT(r.err, Catch::Matches("[\\s\\S]*hvrun: timings: login shells \\(exec request to the agent's first "
                                     "bytes\\): median [0-9.]+ (ms|s), slowest " + h2 + " [5-9][0-9.]* s\n[\\s\\S]*"));
  }
  {
    INFO("the same shell under --start-timeout 0.3: its bound (3 s) runs out, the host and its shell are named");
    FaultJob job(lab, home);
    job.mark();
    job.start({"--start-timeout", "0.3"}, "echo ready-$HVRUN_RANK", 0);
    auto r = job.finish(60s);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h2 + ": its login shell has run for 3 s and hvrun-agent has not started; time "
                                      "it with: ssh " + h2 + " true"));
    CHECK(count_of(r.out, "ready-") == 0);
    CHECK(job.last_teardown < 5s);
  }
}

TEST_CASE("fault catalogue: login shells that take a lock one after another at 32 hosts start, as mpirun's do",
          "[lab][faults][timing]") {
  HVRUN_SKIP_WITHOUT_LAB();
  constexpr int kHosts = 32;
  // `-np 32` over every host, a rank each; --start-timeout 5 is far less than the shells take in all.
  const auto job_on = [](const Lab& lab, const TempHome& home, const std::string& start_timeout) {
    std::string hosts;
    for (int i = 0; i < kHosts; ++i) hosts += (i ? "," : "") + lab.host(i);
    return hvrun_on(lab, home,
                    {"-np", std::to_string(kHosts), "-H", hosts, "--start-timeout", start_timeout, "--verbose",
                     "/bin/sh", "-c", "echo ready-$HVRUN_RANK"});
  };
  {
    INFO("every session holds the lab's lock 0.5 s in its shell (pyenv init in a shared home): the last host's agent "
         "starts after 15 s, and the job waits for it");
    Lab lab(kHosts);
    TempHome home;
    REQUIRE(lab.control({"serial-shell", "0.5"}) == 0);
    auto r = run(job_on(lab, home, "5"), 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:ready-") == kHosts);
    CHECK(r.elapsed > 15s);  // the shells did queue: 31 of them, 0.5 s each
    // The timings line, found by its words: std::regex over 32 hosts' --verbose output recurses deep
    // enough to overflow the stack under AddressSanitizer.
    const std::string shells = "hvrun: timings: login shells (exec request to the agent's first bytes): median ";
    const auto at = r.err.find(shells);
    REQUIRE(at != std::string::npos);
    const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
    INFO(line);
    const auto slowest = line.find(", slowest ");
    REQUIRE(slowest != std::string::npos);
    const std::string tail = line.substr(line.find(' ', slowest + 10) + 1);  // "14.35 s"
    CHECK(tail.size() > 2);
    CHECK(tail.substr(tail.size() - 2) == " s");
    CHECK(std::stod(tail) >= 10.0);  // the last host's shell waited for most of the others'
  }
  {
    INFO("the machine's own ~/.bashrc in every session (LAB_SKIP_BASHRC=0: here it runs pyenv init, which takes a "
         "lock in ~/.pyenv/shims; 32 of them took 121 s under mpirun), under the default --start-timeout (30 s, "
         "where hvrun used to give up)");
    Lab lab(kHosts, Lab::default_prefix(), {"LAB_SKIP_BASHRC=0"});
    TempHome home;
    auto r = run(job_on(lab, home, "30"), 330s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:ready-") == kHosts);
  }
}

// --rsh-agent on the lab: agents started by a command (tests/support/lab_rsh_agent.sh, which enters a
// lab host's namespaces directly) instead of hvrun's SSH, with the hosts' sshd stopped. The same
// launch, NIC discovery, supervision and teardown as over SSH. Needs root; without it the case says
// why it skips.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "launcher/cli/launch_options.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/file_text.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string rsh_wrapper() { return source_dir() + "/tests/support/lab_rsh_agent.sh"; }

// hvrun on lab host 0 with --rsh-agent `rsh` (the lab wrapper by default) and `env` added.
std::vector<std::string> hvrun_rsh(const Lab& lab, const TempHome& home, const std::vector<std::string>& args,
                                   const std::vector<std::string>& env = {}, const std::string& rsh = rsh_wrapper()) {
  std::vector<std::string> cmd{"/usr/bin/env", "HOME=" + home.dir.string()};
  cmd.insert(cmd.end(), env.begin(), env.end());
  cmd.insert(cmd.end(), {hvrun_bin(), "--rsh-agent", rsh});
  cmd.insert(cmd.end(), args.begin(), args.end());
  return lab.on_host(0, cmd);
}

}  // namespace

TEST_CASE("remote shell (--rsh-agent): agents started by a command, no sshd, same launch and teardown", "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h0 = lab.host(0), h1 = lab.host(1), h2 = lab.host(2);
  // No sshd anywhere: a launch that worked over SSH by mistake would fail.
  for (const char* i : {"0", "1", "2"}) REQUIRE(lab.control({"ssh-stop", i}) == 0);
  const fs::path log = home.dir / "rsh.log";

  {
    INFO("two ranks on each host, NIC discovery as usual; the command gets HOST and /bin/sh, nothing more (the "
         "agent's check script comes on its stdin)");
    auto r = run(hvrun_rsh(lab, home,
                           {"--verbose", "-np", "6", "-H", "localhost:2," + h1 + ":2," + h2 + ":2", "sh", "-c",
                            "echo H=$HVRUN_HOSTNAME I=$HVRUN_IFACE"},
                           {"HVRUN_TEST_RSH_LOG=" + log.string()}),
                 60s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto ifaces = lab.list("LAB_FABRIC_IFACES");
    CHECK(count_of(r.out, "<stdout>:H=" + h0 + " I=" + ifaces.at(0) + "\n") == 2);
    CHECK(count_of(r.out, "<stdout>:H=" + h1 + " I=" + ifaces.at(1) + "\n") == 2);
    CHECK(count_of(r.out, "<stdout>:H=" + h2 + " I=" + ifaces.at(2) + "\n") == 2);
    CHECK_THAT(r.err, Catch::Contains("agent on " + h1 + " is up") && Catch::Contains("--rsh-agent"));
    const std::string calls = slurp(log);
    CHECK(count_of(calls, h1 + " /bin/sh\n") == 1);
    CHECK(count_of(calls, h2 + " /bin/sh\n") == 1);
    CHECK(count_of(calls, "\n") == 2);  // one call per remote host, the local one runs without it
  }
  {
    INFO("a failing rank stops the others on every host, and nothing is left");
    const std::string marker = unique_marker();
    auto r = run(hvrun_rsh(lab, home,
                           {"--kill-grace", "1", "-H", h1 + ":2," + h2 + ":2", "-x", marker, "sh", "-c",
                            "if [ $HVRUN_RANK = 3 ]; then sleep 0.5; echo last-words >&2; exit 3; fi; exec sleep 60"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("rank 3 on " + h2 + ": exited with code 3") && Catch::Contains("last-words"));
    CHECK(wait_until_gone(marker, 5s).empty());
  }
  {
    INFO("hvrun killed by SIGKILL: the commands and agents see their channel close, every rank is killed");
    const std::string marker = unique_marker();
    ChildProcess p(hvrun_rsh(lab, home,
                             {"--verbose", "-H", h1 + ":2," + h2, "-x", marker, "sh", "-c",
                              "echo ready; exec sleep 60"}));
    REQUIRE(p.wait_for_stdout("<stdout>:ready", 3, 60s));
    REQUIRE(wait_for_marker_count(marker, 3, 5s) >= 3);
    const auto agents = agent_pids(p.stderr_so_far());
    CHECK(agents.size() == 2);
    p.signal(SIGKILL);
    CHECK(p.wait(10s).exit_code == 128 + SIGKILL);
    CHECK(wait_until_gone(marker, 5s).empty());
    CHECK(agents_left(agents, 2s).empty());
  }
  {
    INFO("a command that fails is named with the host, its exit code and what it wrote");
    auto r = run(hvrun_rsh(lab, home, {"-H", h1, "true"}, {}, "sh -c 'echo no-such-pod >&2; exit 5' --"), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": --rsh-agent 'sh -c 'echo no-such-pod >&2; exit 5' --' exited with code 5 "
                                           "before hvrun-agent said hello (it wrote: no-such-pod)"));
  }
}

TEST_CASE("remote shell (--rsh-agent) on the command line: kept whole; hvrun's SSH options are refused with it",
          "[cli]") {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "hvrun");
    return hvrun::parse_command_line(static_cast<int>(args.size()), args.data()).options;
  };
  auto refused = [&](std::vector<const char*> args) -> std::string {
    try {
      parse(std::move(args));
    } catch (const hvrun::UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(parse({"--rsh-agent", "docker exec -i -u 'a b'", "-H", "a,b", "true"}).rsh_agent == "docker exec -i -u 'a b'");
  CHECK(parse({"-H", "a", "true"}).rsh_agent.empty());
  CHECK(refused({"--rsh-agent", " ", "true"}) ==
        "--rsh-agent: empty command; give one that runs `CMD HOST COMMAND...`, e.g. 'docker exec -i'");
  CHECK(refused({"--rsh-agent", "x", "-p", "2222", "true"}) ==
        "-p/--ssh-port applies to hvrun's own SSH, which --rsh-agent replaces; put it in the --rsh-agent command "
        "instead (e.g. --rsh-agent 'ssh -p 2222')");
  CHECK_THAT(refused({"--ssh-strict-host-key-checking", "--rsh-agent", "x", "true"}),
             Catch::StartsWith("--ssh-strict-host-key-checking applies to hvrun's own SSH"));
  CHECK_THAT(refused({"--rsh-agent", "x", "--ssh-connect-timeout", "3", "true"}),
             Catch::StartsWith("--ssh-connect-timeout applies to hvrun's own SSH"));
}

TEST_CASE("remote shell (--rsh-agent) under `ulimit -Sn 64`: 16 hosts start, and every rank gets 64 back", "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  // Under the user's soft limit of 64, 12 hosts would exhaust hvrun's descriptors ("fcntl(F_DUPFD_CLOEXEC)
  // failed ... Too many open files"): hvrun raises its own limit and gives the commands it starts (and so
  // the agents and ranks) the user's 64 back.
  constexpr int kHosts = 16;
  Lab lab(kHosts);
  TempHome home;
  std::string hosts = "localhost";
  for (int i = 1; i < kHosts; ++i) hosts += "," + lab.host(i);
  auto cmd = hvrun_rsh(lab, home, {"-H", hosts, "sh", "-c", "echo H=$HVRUN_HOSTNAME N=$(ulimit -Sn)"});
  // hvrun_rsh gives `env ... lab.sh exec 0 env HOME=... hvrun ...`: the limit is lowered right before
  // the second env, inside host 0.
  const auto home_at = std::find(cmd.begin(), cmd.end(), "HOME=" + home.dir.string());
  REQUIRE(home_at != cmd.end());
  cmd.insert(home_at - 1, {"sh", "-c", "ulimit -Sn 64 && exec \"$@\"", "sh"});
  auto r = run(cmd, 120s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_of(r.out, " N=64\n") == kHosts);
  for (int i = 0; i < kHosts; ++i) CHECK(count_of(r.out, "<stdout>:H=" + lab.host(i) + " N=64\n") == 1);
}

TEST_CASE("remote shell (--rsh-agent): hosts queued by --connect-concurrency get --start-timeout from their turn",
          "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  // Each agent takes a little over 1 s to start and only one starts at a time: the five remote hosts take
  // over 5 s in all, twice --start-timeout, while each takes less than it. A start timeout counted from
  // the launch would fail the hosts at the end of the queue (as 1,000 hosts under the default 30 s).
  constexpr int kHosts = 6;
  Lab lab(kHosts);
  TempHome home;
  const fs::path slow = home.dir / "slow_rsh_agent.sh";
  {
    std::ofstream f(slow);
    f << "#!/bin/sh\nsleep 1\nexec " << rsh_wrapper() << " \"$@\"\n";
  }
  fs::permissions(slow, fs::perms::owner_all);
  std::string hosts = "localhost";
  for (int i = 1; i < kHosts; ++i) hosts += "," + lab.host(i);
  const auto started = std::chrono::steady_clock::now();
  auto r = run(hvrun_rsh(lab, home,
                         {"--connect-concurrency", "1", "--start-timeout", "2.5", "-H", hosts, "sh", "-c",
                          "echo H=$HVRUN_HOSTNAME"},
                         {}, slow.string()),
               120s);
  const auto took = std::chrono::steady_clock::now() - started;
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  for (int i = 0; i < kHosts; ++i) CHECK(count_of(r.out, "<stdout>:H=" + lab.host(i) + "\n") == 1);
  CHECK(took >= 5s);  // one at a time: the queue really held them back
}

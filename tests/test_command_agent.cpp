// CommandAgent (launcher/start/command_agent.hpp) started here without a lab: the --rsh-agent and srun
// commands, spawned with posix_spawnp. Their lab runs are in test_rsh_agent.cpp and test_slurm_lab.cpp.
#include <catch2/catch.hpp>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "hvrun/error.hpp"
#include "launcher/start/command_agent.hpp"

using hvrun::CommandAgent;
using hvrun::CommandAgentOptions;

namespace {

CommandAgentOptions options(std::vector<std::string> argv) {
  CommandAgentOptions o;
  o.host = "h1";
  o.argv = std::move(argv);
  o.label = "--rsh-agent 'test'";
  o.fix = "the fix";
  o.start_timeout = std::chrono::seconds(10);
  return o;
}

// The value of `field` ("SigBlk:") in /proc/PID/status.
std::string status_field(const std::string& pid, const std::string& field) {
  std::ifstream f("/proc/" + pid + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(field, 0) == 0) return line.substr(line.find_first_not_of(" \t", field.size()));
  }
  return "(no " + field + ")";
}

}  // namespace

TEST_CASE("agent command (--rsh-agent, srun): its own process group, no blocked signals, default SIGPIPE",
          "[integration][command_agent]") {
  // As in hvrun: SIGPIPE ignored, and this thread blocks SIGTERM; the command must get neither.
  struct Restore {
    struct sigaction pipe_action {};
    sigset_t mask{};
    ~Restore() {
      ::sigaction(SIGPIPE, &pipe_action, nullptr);
      ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    }
  } restore;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGPIPE, &ignore, &restore.pipe_action) == 0);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &term, &restore.mask) == 0);

  // The command says its pid (the "hello"), then waits for its stdin to end.
  auto agent = CommandAgent::start(options({"sh", "-c", "echo $$; exec cat >/dev/null"}));
  hvrun::UniqueFd channel = agent->take_channel();
  pollfd p{channel.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10'000) == 1);
  char buf[32] = {};
  const ssize_t n = ::read(channel.get(), buf, sizeof buf - 1);
  REQUIRE(n > 1);
  const std::string pid(buf, static_cast<std::size_t>(n - 1));
  CHECK(::getpgid(std::stoi(pid)) == std::stoi(pid));
  CHECK(status_field(pid, "SigBlk:") == "0000000000000000");
  const unsigned long ignored = std::stoul(status_field(pid, "SigIgn:"), nullptr, 16);
  CHECK((ignored & (1UL << (SIGPIPE - 1))) == 0);
  channel.reset();  // the command's stdin ends; ~CommandAgent reaps it
}

TEST_CASE("agent command (--rsh-agent) not found by its shell: exit code 127 and what the shell wrote",
          "[integration][command_agent]") {
  // start_by_rsh runs `/bin/sh -c 'CMD "$@"' hvrun-rsh-agent HOST /bin/sh`: the shell, not posix_spawnp,
  // looks CMD up.
  try {
    CommandAgent::start(options({"/bin/sh", "-c", "hvrun-no-such-rsh \"$@\"", "hvrun-rsh-agent", "h1", "/bin/sh"}));
    FAIL("a command that does not exist started");
  } catch (const hvrun::Error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("h1: --rsh-agent 'test' exited with code 127 (command not found?) before "
                                           "hvrun-agent said hello (it wrote: ") &&
                             Catch::Contains("hvrun-no-such-rsh") && Catch::EndsWith("; the fix"));
  }
}

TEST_CASE("agent command (--rsh-agent, srun) that cannot be started: the host, the command, the call and why",
          "[integration][command_agent]") {
  CommandAgentOptions o;
  o.host = "h1";
  o.argv = {"hvrun-no-such-command", "h1"};
  o.label = "srun";
  o.fix = "check that `srun -N1 -w h1 ...` works";
  try {
    CommandAgent::start(o);
    FAIL("a command that does not exist started");
  } catch (const hvrun::Error& e) {
    CHECK(std::string(e.what()) ==
          "h1: cannot start srun: posix_spawnp 'hvrun-no-such-command': No such file or directory (command not "
          "found?); check that `srun -N1 -w h1 ...` works");
  }
}

// hvrun raises its own soft limit on open files and gives the processes it starts the original one back
// (common/open_files_limit.hpp): the local agent (forked) and the --rsh-agent/srun commands
// (spawned through a shell that sets it); the agent raises its own and gives its ranks the original.
// Each case is its own process under ctest ([integration]), so the raised limit stays in it.
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/unique_fd.hpp"
#include "hvrun/error.hpp"
#include "common/open_files_limit.hpp"
#include "launcher/start/command_agent.hpp"
#include "launcher/start/local_agent.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr rlim_t kUserLimit = 256;  // the "ulimit -Sn" the user ran hvrun under

// Lowers this process's soft limit to kUserLimit (as `ulimit -Sn 256` would have), then raises it the
// way hvrun does at start; checks both ends.
void start_like_hvrun() {
  rlimit now{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &now) == 0);
  REQUIRE(now.rlim_max > kUserLimit);
  now.rlim_cur = kUserLimit;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &now) == 0);
  raise_open_files_limit();
  rlimit raised{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &raised) == 0);
  CHECK(raised.rlim_cur == now.rlim_max);
  CHECK(original_open_files_limit().rlim_cur == kUserLimit);
  CHECK(original_open_files_limit().rlim_max == now.rlim_max);
}

// One line from `fd`, within 10 s.
std::string read_line(int fd) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (char c = 0; c != '\n';) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    REQUIRE(left.count() > 0);
    REQUIRE(::poll(&p, 1, static_cast<int>(left.count())) == 1);
    REQUIRE(::read(fd, &c, 1) == 1);
    if (c != '\n') line += c;
  }
  return line;
}

// "Max open files            256                  1048576              files" -> "256".
std::string soft_limit_in_proc(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/limits");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("Max open files", 0) != 0) continue;
    const auto begin = line.find_first_not_of(' ', std::string("Max open files").size());
    return line.substr(begin, line.find(' ', begin) - begin);
  }
  return "(no Max open files line)";
}

}  // namespace

TEST_CASE("open files limit: raised for hvrun, the user's own for an agent command (--rsh-agent, srun) and the "
          "local agent",
          "[integration][open_files_limit]") {
  start_like_hvrun();
  // The command prints its pid and the soft limit of a child it starts at once (what a prlimit after the
  // spawn would miss: the lab saw it), then waits for its stdin to end.
  CommandAgentOptions o;
  o.host = "h1";
  o.argv = {"sh", "-c", "echo $$; echo $(ulimit -Sn); exec cat >/dev/null"};
  o.label = "--rsh-agent 'test'";
  o.fix = "the fix";
  auto agent = CommandAgent::start(o);
  UniqueFd channel = agent->take_channel();
  const std::string pid = read_line(channel.get());
  CHECK(read_line(channel.get()) == std::to_string(kUserLimit));
  CHECK(soft_limit_in_proc(pid) == std::to_string(kUserLimit));
  channel.reset();
  agent.reset();

  // The command goes through a shell that sets the limit; one it does not find is the shell's 127.
  o.argv = {"hvrun-no-such-command", "h1"};
  try {
    CommandAgent::start(o);
    FAIL("a command that does not exist started");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("h1: --rsh-agent 'test' exited with code 127 (command not found?) before "
                                           "hvrun-agent said hello (it wrote: ") &&
                             Catch::Contains("hvrun-no-such-command") && Catch::EndsWith("; the fix"));
  }

  // The local agent is forked (it needs PR_SET_PDEATHSIG) and gets the limit before it executes.
  const fs::path dir = fs::temp_directory_path() / ("hvrun-nofile-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fake_agent = dir / "hvrun-agent";
  std::ofstream(fake_agent) << "#!/bin/sh\nulimit -Sn\n";
  fs::permissions(fake_agent, fs::perms::owner_all);
  {
    LocalAgent local(fake_agent.string());
    UniqueFd local_channel = local.take_channel();
    CHECK(read_line(local_channel.get()) == std::to_string(kUserLimit));
  }
  fs::remove_all(dir);
}

TEST_CASE("open files limit: the agent raises its own to the hard limit, its ranks get the user's back",
          "[integration]") {
  rlimit now{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &now) == 0);
  if (now.rlim_max <= kUserLimit || now.rlim_max == RLIM_INFINITY) {
    WARN("skipped: the hard open files limit (" << now.rlim_max << ") leaves nothing to raise above " << kUserLimit);
    return;
  }
  // hvrun under `ulimit -Sn 256`; the rank prints its own soft limit and its parent's (the agent's).
  const std::string user_limit = "--nofile=" + std::to_string(kUserLimit) + ":" + std::to_string(now.rlim_max);
  auto r = test::run({"/usr/bin/prlimit", user_limit, test::hvrun_bin(), "-H", "localhost", "-np", "1", "sh", "-c",
                      "echo rank=$(ulimit -Sn) agent=$(sed -n 's/^Max open files *\\([0-9]*\\).*/\\1/p' "
                      "/proc/$PPID/limits)"},
                     60s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("rank=" + std::to_string(kUserLimit) + " agent=" + std::to_string(now.rlim_max)));
}

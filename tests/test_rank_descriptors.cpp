// What a rank inherits of its agent's descriptors, and who may look inside hvrun and the agent (issue 41):
// a rank holds its 0, 1 and 2 alone (the rank contract names no descriptor: it is environment variables
// only), whatever the agent holds open (its channel, Asio's listeners and sockets, the other ranks' pipes);
// hvrun and the agent are not dumpable (their /proc/PID files belong to root, so another process of the same
// user cannot read their memory, environment or descriptors), while ranks, after their exec, are.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/neighbour_user.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;

namespace {

// The descriptors /proc/PID/fd lists, each with what it points at.
std::map<int, std::string> descriptors_of(pid_t pid) {
  std::map<int, std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::error_code ec;
    out[std::stoi(entry.path().filename().string())] = std::filesystem::read_symlink(entry.path(), ec).string();
  }
  return out;
}

std::string text_of(const std::map<int, std::string>& fds) {
  std::string text;
  for (const auto& [fd, target] : fds) text += std::to_string(fd) + " -> " + target + "\n";
  return text;
}

// The owner of /proc/PID/environ: root while the process is not dumpable (the kernel's task_dump_owner;
// the /proc/PID folder itself keeps the process's owner on recent kernels).
uid_t proc_owner(pid_t pid) {
  struct stat st {};
  REQUIRE(::stat(("/proc/" + std::to_string(pid) + "/environ").c_str(), &st) == 0);
  return st.st_uid;
}

// The children of `pid` (every thread's), from /proc.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) out.push_back(child);
  }
  return out;
}

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

const char* const kRankScript = "echo started; exec sleep 30";

}  // namespace

TEST_CASE("a rank holds no descriptor of its agent beyond its 0 1 and 2", "[integration]") {
  const std::string marker = unique_marker();
  ChildProcess hvrun({hvrun_bin(), "-np", "3", "-H", "localhost:3", "-x", marker, "sh", "-c", kRankScript});
  REQUIRE(hvrun.wait_for_stdout("started", 3, 30s));
  REQUIRE(wait_for_marker_count(marker, 3, 10s) == 3);
  for (const pid_t rank : processes_with_marker(marker)) {
    // The rank's `exec sleep` loads its libraries after printing (the dynamic loader holds each open as
    // descriptor 3 for a moment): a leaked descriptor stays, so the table is read until it holds 3 or 5 s.
    auto fds = descriptors_of(rank);
    for (int look = 0; look < 50 && fds.size() != 3; ++look) {
      std::this_thread::sleep_for(100ms);
      fds = descriptors_of(rank);
    }
    INFO("rank " << rank << " holds:\n" << text_of(fds));
    CHECK(fds.size() == 3);
    CHECK(fds.count(0) == 1);
    CHECK(fds.at(0) == "/dev/null");
    CHECK(fds.count(1) == 1);
    CHECK(fds.count(2) == 1);
  }
  hvrun.signal(SIGTERM);
  hvrun.wait(30s);
  CHECK(wait_until_gone(marker, 5s).empty());
}

TEST_CASE("hvrun and its agent are not dumpable during a job but its ranks are", "[integration]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root (a second Unix user runs the job)");
    return;
  }
  const char* prefix = std::getenv("HVRUN_TEST_LAB_PREFIX");
  NeighbourUser user(std::string("dump") + (prefix != nullptr ? prefix : ""));
  const std::filesystem::path home = std::filesystem::temp_directory_path() / ("hvrun-dump-" + std::to_string(::getpid()));
  std::filesystem::create_directories(home / "bin");
  // hvrun and its agent copied where the user can run them: the build's own folder may be closed to
  // other users (a clone in a mktemp -d folder, mode 0700).
  const std::filesystem::path built = hvrun_bin();
  for (const char* program : {"hvrun", "hvrun-agent"})
    std::filesystem::copy_file(built.parent_path() / program, home / "bin" / program);
  user.give(home.string(), true);
  const std::string marker = unique_marker();
  // As the user, from a directory of theirs (the ranks start in hvrun's working directory).
  ChildProcess hvrun({"/usr/bin/setpriv", "--reuid=" + std::to_string(user.uid()), "--regid=" + std::to_string(user.gid()),
                      "--clear-groups", "--", "/usr/bin/env", "HOME=" + home.string(), "TMPDIR=" + home.string(), "sh", "-c",
                      "cd \"$HOME\" && exec \"$0\" \"$@\"", (home / "bin" / "hvrun").string(), "-np", "2", "-H", "localhost:2", "-x", marker,
                      "sh", "-c", kRankScript});
  const bool started = hvrun.wait_for_stdout("started", 2, 30s);
  INFO(hvrun.stdout_so_far() << hvrun.stderr_so_far());
  REQUIRE(started);
  REQUIRE(wait_for_marker_count(marker, 2, 10s) == 2);
  // Not dumpable: /proc/PID/environ belongs to root, not to the user that runs it.
  CHECK(comm_of(hvrun.pid()) == "hvrun");
  CHECK(proc_owner(hvrun.pid()) == 0);
  std::vector<pid_t> agents;
  for (const pid_t child : children_of(hvrun.pid()))
    if (comm_of(child) == "hvrun-agent") agents.push_back(child);
  REQUIRE(agents.size() == 1);
  CHECK(proc_owner(agents.front()) == 0);
  // Ranks exec'd: dumpable again, so crash stacks and hang autopsies can read them.
  for (const pid_t rank : processes_with_marker(marker)) {
    CHECK(proc_owner(rank) == user.uid());
    CHECK(descriptors_of(rank).size() == 3);
  }
  hvrun.signal(SIGTERM);
  hvrun.wait(30s);
  CHECK(wait_until_gone(marker, 5s).empty());
  std::error_code ignored;
  std::filesystem::remove_all(home, ignored);
}

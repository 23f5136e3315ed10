// The one owner of child processes (common/child_process.hpp): exec failures with the program and
// strerror, exit codes and 128+N, process groups, PR_SET_PDEATHSIG, the handle that never leaves a
// zombie, and the bounded tail of an output (common/byte_tail.hpp).
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/proc_scan.hpp"
#include "common/byte_tail.hpp"
#include "common/child_process.hpp"
#include "common/exit_status.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;

namespace {

ChildSpec shell(const std::string& script, StartBy by = StartBy::kFork) {
  return ChildSpec{.argv = {"/bin/sh", "-c", script}, .start_by = by, .what = "a test shell"};
}

// Polls until `pid` is a zombie or gone (it is not our child to reap), at most `timeout`.
bool ends_within(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!test::is_zombie_or_gone(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Waits for our own child `pid` without a Child handle, at most `timeout`; -1 when it did not end.
int raw_wait(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 || std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(5ms);
  }
}

}  // namespace

TEST_CASE("a program that cannot be executed is reported with its name and strerror", "[child_process]") {
  for (const StartBy by : {StartBy::kFork, StartBy::kSpawn}) {
    ChildSpec spec{.argv = {"hvrun-no-such-program-xyz"}, .start_by = by, .what = "a test program"};
    try {
      Child::start(spec);
      FAIL("started a program that does not exist");
    } catch (const SpawnError& e) {
      CHECK(std::string(e.what()) == "cannot execute 'hvrun-no-such-program-xyz': No such file or directory");
      CHECK(e.step() == SpawnError::Step::kExec);
      CHECK(e.error_number() == ENOENT);
    }
  }
  ChildSpec in_missing_dir{.argv = {"/bin/true"}, .cwd = "/hvrun-no-such-dir", .what = "a test program"};
  try {
    Child::start(in_missing_dir);
    FAIL("started in a directory that does not exist");
  } catch (const SpawnError& e) {
    CHECK(std::string(e.what()) == "cannot enter working directory '/hvrun-no-such-dir': No such file or directory");
    CHECK(e.step() == SpawnError::Step::kChdir);
  }
  ChildSpec not_executable{.argv = {"/etc/passwd"}, .what = "a test program"};
  CHECK_THROWS_WITH(Child::start(not_executable), "cannot execute '/etc/passwd': Permission denied");
}

TEST_CASE("a wait status becomes an exit code, 128+N for signal N, and its words", "[child_process]") {
  for (const StartBy by : {StartBy::kFork, StartBy::kSpawn}) {
    Child exits = Child::start(shell("exit 3", by));
    const ExitStatus three = exits.wait();
    CHECK(three.code == 3);
    CHECK(three.signal == 0);
    CHECK(three.text() == "exited with code 3");
    CHECK(exits.wait().code == 3);  // reaped once, remembered

    Child killed = Child::start(shell("kill -TERM $$", by));
    const ExitStatus term = killed.wait();
    CHECK(term.code == 128 + SIGTERM);
    CHECK(term.signal == SIGTERM);
    CHECK(term.text() == "was killed by SIGTERM");
  }
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(12345) == "signal 12345");
}

TEST_CASE("the environment, working directory and streams the spec gives reach the child", "[child_process]") {
  ChildSpec spec = shell("echo \"$HVRUN_TEST_X $(pwd)\"; echo oops >&2; read line; echo \"stdin:$line\"");
  spec.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "HVRUN_TEST_X=42"};
  spec.cwd = "/tmp";
  spec.stdio = {ChildStream::dev_null(), ChildStream::pipe("stdout of a test"), ChildStream::pipe("stderr of a test")};
  Child child = Child::start(spec);
  const auto output = child.read_outputs(10s, 4096);
  REQUIRE(output.has_value());
  CHECK(output->out == "42 /tmp\nstdin:\n");
  CHECK(output->err == "oops\n");
  CHECK(child.wait().code == 0);

  // A descriptor of the caller's, by posix_spawnp.
  Pipe pipe = make_pipe("test pipe");
  ChildSpec spawned = shell("echo spawned", StartBy::kSpawn);
  spawned.stdio[1] = ChildStream::of_fd(pipe.write.get());
  Child other = Child::start(spawned);
  pipe.write.reset();
  CHECK(other.wait().code == 0);
  char buf[64] = {};
  CHECK(::read(pipe.read.get(), buf, sizeof buf) == 8);
  CHECK(std::string(buf) == "spawned\n");
}

namespace {
volatile sig_atomic_t handled_in_parent = 0;
void note_usr1(int) { handled_in_parent = 1; }
}  // namespace

// A kFork child runs on the parent's memory until it executes: what it execs must be what execvp in a
// process of its own would have chosen, and no handler of the parent's may run in it.
TEST_CASE("a child searches its own PATH as execvp would, with no handler or blocked signal of the parent's", "[child_process]") {
  struct TempDir {
    std::string path = (std::filesystem::temp_directory_path() / "hvrun-child-path-XXXXXX").string();
    TempDir() { REQUIRE(::mkdtemp(path.data()) != nullptr); }
    ~TempDir() { std::filesystem::remove_all(path); }
  } dir;
  const std::string bin = dir.path + "/bin", locked = dir.path + "/locked";
  REQUIRE(::mkdir(bin.c_str(), 0755) == 0);
  REQUIRE(::mkdir(locked.c_str(), 0755) == 0);
  const auto write_file = [](const std::string& path, const std::string& text, mode_t mode) {
    std::ofstream(path) << text;
    REQUIRE(::chmod(path.c_str(), mode) == 0);
  };
  write_file(bin + "/hvrun-test-prog", "#!/bin/sh\necho \"bin $1\"\n", 0755);
  write_file(bin + "/hvrun-test-noshebang", "echo \"no shebang $1\"\n", 0755);  // execvp runs it under /bin/sh
  write_file(locked + "/hvrun-test-prog", "#!/bin/sh\necho locked\n", 0644);  // not executable: skipped
  write_file(locked + "/hvrun-test-only-locked", "#!/bin/sh\necho locked\n", 0644);

  const auto run = [&](const std::string& program, const std::string& path) {
    ChildSpec spec{.argv = {program, "x"}, .env = std::vector<std::string>{"PATH=" + path}, .what = "a test program"};
    spec.stdio[1] = ChildStream::pipe("stdout of a test");
    Child child = Child::start(spec);
    const auto output = child.read_outputs(10s, 4096);
    CHECK(child.wait().code == 0);
    return output ? output->out : std::string("(no output)");
  };
  // Only on the child's PATH, never on this process's; an entry without the execute bit is passed over.
  CHECK(run("hvrun-test-prog", locked + ":" + bin) == "bin x\n");
  CHECK(run("hvrun-test-noshebang", "/nonexistent:" + bin) == "no shebang x\n");
  ChildSpec denied{.argv = {"hvrun-test-only-locked"}, .env = std::vector<std::string>{"PATH=" + locked}, .what = "a test program"};
  CHECK_THROWS_WITH(Child::start(denied), "cannot execute 'hvrun-test-only-locked': Permission denied");

  // The parent catches SIGUSR1 and blocks SIGUSR2: the child meets both at their defaults.
  struct sigaction handler{}, before{};
  handler.sa_handler = note_usr1;
  REQUIRE(::sigaction(SIGUSR1, &handler, &before) == 0);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &usr2, &old_mask) == 0);
  Child usr1 = Child::start(shell("kill -USR1 $$; sleep 5"));
  Child usr2_child = Child::start(shell("kill -USR2 $$; sleep 5"));
  const ExitStatus by_usr1 = usr1.wait(), by_usr2 = usr2_child.wait();
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGUSR1, &before, nullptr);
  CHECK(by_usr1.signal == SIGUSR1);
  CHECK(by_usr2.signal == SIGUSR2);
  CHECK(handled_in_parent == 0);
}

TEST_CASE("a signal to a child that leads its group reaches its descendants too", "[child_process]") {
  for (const StartBy by : {StartBy::kFork, StartBy::kSpawn}) {
    ChildSpec spec = shell("sleep 1000 & echo $!; wait", by);
    spec.own_group = true;
    spec.stdio[1] = ChildStream::pipe("stdout of a test");
    Child child = Child::start(spec);
    CHECK(::getpgid(child.pid()) == child.pid());
    UniqueFd out = child.take_stream(1);
    std::string line;
    char c = 0;
    while (::read(out.get(), &c, 1) == 1 && c != '\n') line += c;
    const pid_t grandchild = static_cast<pid_t>(std::stol(line));
    CHECK(::getpgid(grandchild) == child.pid());

    child.signal(SIGTERM);
    const auto status = child.wait_for(10s);
    REQUIRE(status.has_value());
    CHECK(status->signal == SIGTERM);
    CHECK(ends_within(grandchild, 10s));
    child.signal(SIGKILL);  // reaped: nothing is sent to a pid that may have been reused
  }
}

TEST_CASE("living descendants: grandchildren and theirs, not zombies", "[child_process]") {
  // The child (exec'd into sleep) has a subshell, which has a sleep of its own.
  ChildSpec spec = shell("(sleep 1000; true) & echo $!; exec sleep 1000");
  spec.own_group = true;
  spec.stdio[1] = ChildStream::pipe("stdout of a test");
  Child child = Child::start(spec);
  UniqueFd out = child.take_stream(1);
  std::string line;
  char c = 0;
  while (::read(out.get(), &c, 1) == 1 && c != '\n') line += c;
  const pid_t subshell = static_cast<pid_t>(std::stol(line));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::vector<pid_t> found;
  while ((found = living_descendants_of(child.pid())).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  REQUIRE(found.size() == 2);
  CHECK(std::find(found.begin(), found.end(), subshell) != found.end());
  // The walk along the children files and the pass over every process agree.
  std::vector<pid_t> scanned = living_descendants_of(child.pid(), DescendantWalk::kFullScan);
  std::sort(found.begin(), found.end());
  std::sort(scanned.begin(), scanned.end());
  CHECK(scanned == found);
  const pid_t deepest = found[0] == subshell ? found[1] : found[0];
  CHECK(read_proc_stat(deepest)->ppid == subshell);
  // The deepest sleep ends; the subshell then exits and stays a zombie (sleep never reaps it): neither counts.
  REQUIRE(::kill(deepest, SIGKILL) == 0);
  while (!living_descendants_of(child.pid()).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  CHECK(living_descendants_of(child.pid()).empty());
  CHECK(living_descendants_of(child.pid(), DescendantWalk::kFullScan).empty());
  CHECK(read_proc_stat(subshell)->state == 'Z');
  child.signal(SIGKILL);
}

TEST_CASE("a child with a death signal ends when the thread that started it ends", "[child_process]") {
  pid_t pid = -1;
  std::thread starter([&] {
    ChildSpec spec{.argv = {"sleep", "1000"}, .death_signal = SIGKILL, .what = "a test sleeper"};
    pid = Child::start(spec).release();
  });
  starter.join();
  REQUIRE(pid > 0);
  const int status = raw_wait(pid, 10s);
  REQUIRE(status != -1);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);

  // Without one it outlives its starter thread (and the handle kills it).
  std::optional<Child> kept;
  std::thread other([&] { kept = Child::start(ChildSpec{.argv = {"sleep", "1000"}, .what = "a test sleeper"}); });
  other.join();
  CHECK_FALSE(kept->wait_for(200ms).has_value());
}

TEST_CASE("a child whose handle goes is killed and reaped, never left a zombie", "[child_process]") {
  pid_t pid = -1;
  {
    Child child = Child::start(ChildSpec{.argv = {"sleep", "1000"}, .what = "a test sleeper"});
    pid = child.pid();
    const auto before = std::chrono::steady_clock::now();
    CHECK_FALSE(child.wait_for(50ms).has_value());
    CHECK(std::chrono::steady_clock::now() - before < 5s);
    Child moved = std::move(child);
    CHECK(child.pid() == -1);
    CHECK(moved.pid() == pid);
  }
  // Reaped, not a zombie: /proc has no entry left for it.
  CHECK(::kill(pid, 0) == -1);
  CHECK(errno == ESRCH);
}

TEST_CASE("a bounded tail keeps the last bytes of a stream", "[child_process]") {
  ByteTail tail(8);
  tail.append("abc");
  CHECK(tail.text() == "abc");
  tail.append("defghij");
  CHECK(tail.text() == "cdefghij");
  tail.append(std::string(100, 'x') + "12345678");
  CHECK(tail.text() == "12345678");

  // A child's outputs, each to `limit` bytes, the last ones kept.
  ChildSpec spec = shell("i=0; while [ $i -lt 2000 ]; do printf 'line %05d\\n' $i >&2; i=$((i+1)); done; echo END >&2",
                         StartBy::kSpawn);
  spec.stdio[1] = ChildStream::pipe("stdout of a test");
  spec.stdio[2] = ChildStream::pipe("stderr of a test");
  Child child = Child::start(spec);
  const auto output = child.read_outputs(30s, 4096);
  REQUIRE(output.has_value());
  CHECK(output->out.empty());
  CHECK(output->err.size() == 4096);
  CHECK_THAT(output->err, Catch::EndsWith("line 01999\nEND\n"));
  CHECK(child.wait().code == 0);
}

TEST_CASE("reading a child's outputs stops at the deadline", "[child_process]") {
  ChildSpec spec{.argv = {"sleep", "1000"},
                 .stdio = {ChildStream::inherit(), ChildStream::pipe("stdout of a test"), ChildStream::inherit()},
                 .what = "a test sleeper"};
  Child child = Child::start(spec);
  const auto before = std::chrono::steady_clock::now();
  CHECK_FALSE(child.read_outputs(100ms, 4096).has_value());
  CHECK(std::chrono::steady_clock::now() - before < 5s);
}

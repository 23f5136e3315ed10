// Every child owned to the end by its handle (common/child_process.hpp, common/owned_children.hpp):
// a handle reaps its own child by pid, with its resource usage; the sweep a subreaper runs for what no
// handle owns leaves every handle's child alone; a child let go without waiting is swept later.
#include <catch2/catch.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "agent/proc_scan.hpp"
#include "common/child_process.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;

namespace {

// Polls until `pid` has ended (a zombie, or gone), at most 10 s.
bool ended(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!test::is_zombie_or_gone(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

}  // namespace

TEST_CASE("the sweep for children no handle owns leaves a handle's child its own exit status", "[child_process]") {
  Child owned = Child::start(ChildSpec{.argv = {"/bin/sh", "-c", "exit 3"}, .what = "a test shell"});
  // A child of this process that no handle owns, as a subreaper adopts one.
  const pid_t stray = ::fork();
  REQUIRE(stray >= 0);
  if (stray == 0) ::_exit(5);
  REQUIRE(ended(owned.pid()));
  REQUIRE(ended(stray));

  CHECK(reap_unowned_children(children_of(::getpid())) >= 1);
  CHECK(gone(stray));
  CHECK_FALSE(gone(owned.pid()));  // still a zombie, its status kept for its handle
  const auto status = owned.try_wait();
  REQUIRE(status);
  CHECK(status->code == 3);
}

TEST_CASE("a handle reaps its child with the child's resource usage", "[child_process]") {
  // dd reads into a buffer of 40 MiB: its peak resident set is at least that.
  Child child = Child::start(ChildSpec{.argv = {"dd", "if=/dev/zero", "of=/dev/null", "bs=40M", "count=1"},
                                       .stdio = {ChildStream::inherit(), ChildStream::dev_null(), ChildStream::dev_null()},
                                       .what = "dd"});
  CHECK(child.usage().ru_maxrss == 0);  // not reaped yet
  CHECK(child.wait().code == 0);
  CHECK(child.usage().ru_maxrss >= 40 * 1024);
  // A move keeps it.
  const Child moved = std::move(child);
  CHECK(moved.usage().ru_maxrss >= 40 * 1024);
}

TEST_CASE("a child's end descriptor turns readable when it ends", "[child_process]") {
  Child child = Child::start(ChildSpec{.argv = {"sleep", "0.2"}, .what = "a test sleeper"});
  const UniqueFd end = child.end_descriptor();
  if (!end) {
    WARN("skipped: this kernel has no pidfd_open (before 5.3)");
    return;
  }
  pollfd p{end.get(), POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0);
  CHECK(::poll(&p, 1, 10000) == 1);
  const auto status = child.try_wait();
  REQUIRE(status);
  CHECK(status->code == 0);
}

TEST_CASE("a child let go without waiting is killed, and swept once it has ended", "[child_process]") {
  SECTION("one that has ended already is reaped by its handle") {
    Child child = Child::start(ChildSpec{.argv = {"true"}, .what = "true"});
    const pid_t pid = child.pid();
    REQUIRE(ended(pid));
    child.kill_without_waiting();
    CHECK(gone(pid));
  }
  SECTION("one still running is killed and left to the sweep") {
    // Its own group, as ranks and the interpreter have: the SIGKILL goes to the group.
    Child child = Child::start(ChildSpec{.argv = {"sleep", "1000"}, .own_group = true, .what = "a test sleeper"});
    const pid_t pid = child.pid();
    child.kill_without_waiting();
    if (child.pid() == pid) {  // it died at once, and its handle reaped it
      REQUIRE(child.try_wait());
      CHECK(child.try_wait()->signal == SIGKILL);
    } else {
      CHECK(child.pid() == -1);  // the handle owns no child now; its destructor waits for nothing
      REQUIRE(ended(pid));
      CHECK(reap_unowned_children(children_of(::getpid())) >= 1);
      CHECK(gone(pid));
    }
  }
}

// The test labs' own promise: a lab is removed even when its test process dies without unwinding
// (ctest's timeout, SIGKILL, a crash), so that no namespace, sshd or state directory outlives a run.
#include <catch2/catch.hpp>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;

namespace {

std::string reaper_prefix() { return Lab::default_prefix() + "rp"; }

bool lab_namespaces_exist(const std::string& prefix) {
  const ChildResult r = run({"/usr/bin/env", "ip", "netns", "list"}, 10s);
  return r.out.find(prefix + "-") != std::string::npos;
}

}  // namespace

// Run only by the case below, in a process of its own that it kills with its lab up.
TEST_CASE("lab reaper child: brings a lab up and dies by SIGKILL", "[.][child][lab-reaper-child]") {
  Lab lab(2, reaper_prefix());
  std::cout << "lab up" << std::endl;
  ::raise(SIGKILL);
}

TEST_CASE("test labs: a lab whose test process is killed (SIGKILL) is removed by its reaper", "[lab][lab-reaper]") {
  HVRUN_SKIP_WITHOUT_LAB();
  const std::string prefix = reaper_prefix();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  struct Cleanup {  // whatever the reaper leaves, this test removes
    std::string prefix;
    ~Cleanup() {
      run({source_dir() + "/scripts/lab.sh", "down"}, 60s, {"LAB_PREFIX=" + prefix, "LAB_DIR=/tmp/" + prefix});
    }
  } cleanup{prefix};

  ChildProcess child({self, "[lab-reaper-child]"});
  const bool up = child.wait_for_stdout("lab up", 1, 150s);
  INFO("the child's stderr: " << child.stderr_so_far());
  REQUIRE(up);
  REQUIRE(lab_namespaces_exist(prefix));
  const ChildResult killed = child.wait(30s);
  CHECK(killed.exit_code == 128 + SIGKILL);

  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while ((lab_namespaces_exist(prefix) || std::filesystem::exists("/tmp/" + prefix)) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(200ms);
  CHECK_FALSE(lab_namespaces_exist(prefix));
  CHECK_FALSE(std::filesystem::exists("/tmp/" + prefix));

  // The prefix is free again: a new lab of it comes up (the reaper has let its lock go; Lab throws
  // when the lock stays held for 2 minutes).
  {
    Lab again(2, prefix);
    CHECK(lab_namespaces_exist(prefix));
  }
  CHECK_FALSE(lab_namespaces_exist(prefix));
}

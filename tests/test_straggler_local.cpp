// Issue 40 on one host (no lab): torch DDP over Gloo, three ranks, the program unchanged. A rank that
// sleeps in its "data loader" every step is named, with its cause, while the job runs; a uniform job names
// nobody. The lab cases (a slow link, a CPU quota) come with the rest of the issue.
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/support/child_process.hpp"
#include "tests/support/torch_python.hpp"
#include "tests/sshd_fixture.hpp"

using namespace hvrun::test;
using hvrun::testing::TempDir;
using namespace std::chrono_literals;

namespace {

// `steps` allreduces of 4 MiB; rank `sleeper` (-1: none) sleeps 0.2 s before each.
std::string program(int steps, int sleeper) {
  return "import time, torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo')\n"
         "r = dist.get_rank()\n"
         "t = torch.ones(1 << 20)\n"
         "for step in range(" + std::to_string(steps) + "):\n"
         "    if r == " + std::to_string(sleeper) + ":\n"
         "        time.sleep(0.2)\n"
         "    dist.all_reduce(t)\n"
         "print('rank', r, 'done', flush=True)\n";
}

ChildResult run_job(const std::string& script) {
  return run({hvrun_bin(), "-np", "3", "-H", "localhost:3", "-x", "OMP_NUM_THREADS=1", kTorchPython, script}, 120s);
}

}  // namespace

TEST_CASE("straggler on one host: a rank that sleeps for its data every step is named while the job runs, a "
          "uniform job names nobody", "[integration]") {
  if (auto why = torch_unavailable()) {
    WARN("skipped: " << *why);
    return;
  }
  TempDir dir;
  const std::string sleeper = (dir.path() / "sleeper.py").string(), uniform = (dir.path() / "uniform.py").string();
  std::ofstream(sleeper) << program(60, 1);  // 12 s of steps: the name comes after three 2 s windows
  std::ofstream(uniform) << program(600, -1);
  const ChildResult slow = run_job(sleeper);
  INFO(slow.err);
  CHECK(slow.exit_code == 0);
  CHECK_THAT(slow.err, Catch::Contains("hvrun: rank 1 on localhost holds the job back: waiting for its own data "
                                       "(file reads, the disk, sleeps)") &&
                           Catch::Contains("in their collectives; look at its data loading"));
  const ChildResult even = run_job(uniform);
  INFO(even.err);
  CHECK(even.exit_code == 0);
  CHECK_THAT(even.err, !Catch::Contains("holds the job back"));
}

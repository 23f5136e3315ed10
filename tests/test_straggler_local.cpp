// Issue 40 on one host (no lab): torch DDP over Gloo, three ranks, the program unchanged. A rank that
// sleeps in its "data loader" every step is named, with its cause, while the job runs; --no-straggler-watch
// observes nothing. The lab cases: a CPU quota and a uniform job (test_straggler_lab.cpp), a shaped link
// (test_link_lab.cpp).
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/support/child_process.hpp"
#include "tests/support/file_text.hpp"
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

ChildResult run_job(std::vector<std::string> flags, const std::string& script) {
  std::vector<std::string> argv = {hvrun_bin(), "-np", "3", "-H", "localhost:3", "-x", "OMP_NUM_THREADS=1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {kTorchPython, script});
  return run(argv, 120s);
}

}  // namespace

TEST_CASE("straggler on one host: a rank that sleeps for its data every step is named while the job runs, in its "
          "line and in --events, and with --no-straggler-watch nothing is observed", "[integration]") {
  if (auto why = torch_unavailable()) {
    WARN("skipped: " << *why);
    return;
  }
  TempDir dir;
  const std::string sleeper = (dir.path() / "sleeper.py").string(), events = (dir.path() / "events.jsonl").string();
  std::ofstream(sleeper) << program(60, 1);  // 12 s of steps: the name comes after three 2 s windows
  const ChildResult slow = run_job({"--events", events}, sleeper);
  INFO(slow.err);
  CHECK(slow.exit_code == 0);
  CHECK_THAT(slow.err, Catch::Contains("hvrun: rank 1 on localhost holds the job back: waiting for its own data "
                                       "(file reads, the disk, sleeps)") &&
                           Catch::Contains("in their collectives; look at its data loading"));
  CHECK_THAT(slurp(events), Catch::Contains(R"("cause":"own_data","event":"straggler","host":"localhost","rank":1)"));
  std::ofstream(sleeper) << program(30, 1);
  const ChildResult unwatched = run_job({"--no-straggler-watch", "--events", events}, sleeper);
  INFO(unwatched.err);
  CHECK(unwatched.exit_code == 0);
  CHECK_THAT(unwatched.err, !Catch::Contains("holds the job back"));
  CHECK_THAT(slurp(events), Catch::Contains(R"("event":"job_end")") && !Catch::Contains(R"("event":"observation")"));
}

// torchrun's line across the lab's hosts from one command, with a real torch DDP program
// (tests/torchrun/ddp_env.py: env://, Gloo) run by Debian's python3-torch: every variable of torchrun's
// rank environment is checked on every rank, and the allreduce's result; the -m and --no-python forms;
// a killed rank restarting the job from a checkpoint, with every rank's logs gathered on this machine.
// One case that checks many things, to keep the lab's wall time short; and --nproc-per-node counted on
// each host (no torch needed).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/file_text.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/torch_python.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
using Args = std::vector<std::string>;

namespace {

// "TORCHRUN ok rank=R ..." lines: rank -> the rest of the line.
std::map<int, std::string> ok_lines(const std::string& out) { return rank_lines(out, "TORCHRUN ok"); }

Args operator+(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("torchrun's line on two lab hosts from one command: torchrun's environment on every rank, the allreduce, "
          "-m and --no-python",
          "[lab][torchrun]") {
  HVRUN_SKIP_WITHOUT_TORCH_LAB();
  Lab lab{3};
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2), marker = unique_marker();
  const std::string dir = source_dir() + "/tests/torchrun";
  // What a torchrun user's per-node line says, with `torchrun` changed to `hvrun -H h1,h2`. PYTHON_EXEC
  // picks Debian's Python, which has torch (torchrun's own rule).
  const Args torchrun{"-H", h1 + "," + h2, "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                      h1 + ":29400", "-x", std::string("PYTHON_EXEC=") + kTorchPython, "-x", marker};
  {
    INFO("a script with its own arguments: 2 ranks on each host");
    auto r = run(hvrun_on(lab, home,
                          torchrun + Args{"--nproc-per-node", "2", "--rdzv-id", "job7", "--role", "trainer",
                                          dir + "/ddp_env.py", "2", "2", "trainer", "job7", "0", "2", "-", "-1",
                                          "--lr", "3"}),
                 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto lines = ok_lines(r.out);
    CHECK(lines.size() == 4);
    for (const auto& [rank, rest] : lines) {
      INFO("rank " << rank);
      CHECK(rest == "group=" + std::to_string(rank / 2) + "/2 restart=0 sum=10 step0=0 same=1 args=--lr,3");
    }
    CHECK(count_of(r.err, "OMP_NUM_THREADS=1 for each rank on a host that runs more than one") == 1);
  }
  {
    INFO("-m: the program as a module, one rank on each host (no OMP_NUM_THREADS default)");
    auto r = run(hvrun_on(lab, home,
                          torchrun + Args{"-x", "PYTHONPATH=" + dir, "--nproc_per_node", "1", "-m", "ddp_env", "2", "1",
                                          "default", "-", "0", "1", "-", "-1"}),
                 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(ok_lines(r.out).size() == 2);
    CHECK_THAT(r.err, !Catch::Contains("OMP_NUM_THREADS"));
  }
  {
    INFO("--no-python: the command as it is");
    auto r = run(hvrun_on(lab, home,
                          torchrun + Args{"--nproc-per-node", "2", "--no-python", "sh", "-c",
                                          "echo NOPY $GROUP_RANK/$GROUP_WORLD_SIZE $ROLE_RANK $OMP_NUM_THREADS"}),
                 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    for (const char* line : {"[0]<stdout>:NOPY 0/2 0 1\n", "[1]<stdout>:NOPY 0/2 1 1\n", "[2]<stdout>:NOPY 1/2 2 1\n",
                             "[3]<stdout>:NOPY 1/2 3 1\n"})
      CHECK_THAT(r.out, Catch::Contains(line));
  }
  {
    INFO("--max-restarts 1, --log-dir with --tee 3 and --local-ranks-filter 0: rank 3 SIGKILLs itself at step 2, every "
         "rank restarts from rank 0's checkpoint; the files of every rank of both attempts are on this machine, the "
         "console shows local rank 0's lines only");
    const SharedDir shared("torchrun-lab");
    const std::string logs = (shared.dir / "logs").string(), checkpoint = (shared.dir / "model.pt").string();
    auto r = run(hvrun_on(lab, home,
                          torchrun + Args{"--kill-grace", "2", "--nproc-per-node", "2", "--max-restarts", "1",
                                          "--log-dir", logs, "--tee", "3", "--local-ranks-filter", "0",
                                          dir + "/ddp_env.py", "2", "2", "default", "-", "1", "5", checkpoint, "3"}),
                 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 3 on " + h2 + " killed by SIGKILL"));
    CHECK_THAT(r.err, Catch::Contains("stopping all ranks to restart them (restart 1 of 1, --max-restarts)"));
    const auto lines = ok_lines(r.out);
    CHECK(lines.size() == 2);  // local rank 0 of each host: ranks 0 and 2
    for (const auto& [rank, rest] : lines) {
      INFO("rank " << rank);
      CHECK(rank % 2 == 0);
      CHECK_THAT(rest, Catch::EndsWith("restart=1 sum=10 step0=3 same=1 args="));
    }
    CHECK_THAT(r.out, !Catch::Contains("[1]<stdout>") && !Catch::Contains("[3]<stdout>"));
    std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(logs), {});
    REQUIRE(runs.size() == 1);
    CHECK_THAT(r.err, Catch::Contains("every rank's output is written to " + runs[0].string()));
    for (const char* attempt : {"attempt_0", "attempt_1"})
      for (const std::string& host : {h1, h2})
        for (const char* local : {"0", "1"}) {
          const auto file = runs[0] / attempt / host / local / "stdout.log";
          INFO(file);
          CHECK_THAT(slurp(file), Catch::Contains("TORCHRUN step"));
        }
    CHECK_THAT(slurp(runs[0] / "attempt_1" / h2 / "1" / "stdout.log"),
               Catch::Contains("TORCHRUN ok rank=3 group=1/2 restart=1 sum=10 step0=3 same=1"));
  }
  CHECK(wait_until_gone(marker, 5s).empty());
}

TEST_CASE("torchrun's --nproc-per-node cpu, auto and gpu on two lab hosts: each host's own count of ranks, and a host without "
          "GPUs named",
          "[lab][torchrun][nproc]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab{3};
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  // The lab's hosts share this machine's kernel: each counts its CPUs as this process does.
  const int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  const Args line{"-H", h1 + "," + h2, "--no-python", "sh", "-c", "echo NPROC rank=$RANK $LOCAL_WORLD_SIZE $WORLD_SIZE"};
  // Where this machine has an NVIDIA driver, so have the lab's hosts: auto and gpu are then not the CPUs'.
  const bool gpus = ::access("/proc/driver/nvidia/gpus", F_OK) == 0;
  if (gpus) WARN("an NVIDIA driver here: only --nproc-per-node cpu is checked");
  for (const char* value : {"cpu", "auto"}) {
    if (gpus && value == std::string("auto")) continue;
    INFO("--nproc-per-node " << value << ": " << cpus << " ranks on each host");
    auto r = run(hvrun_on(lab, home, Args{"--verbose", "--nproc-per-node", value} + line), 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto lines = rank_lines(r.out, "NPROC");
    CHECK(static_cast<int>(lines.size()) == 2 * cpus);
    for (const auto& [rank, rest] : lines) CHECK(rest == std::to_string(cpus) + " " + std::to_string(2 * cpus));
    CHECK_THAT(r.err, Catch::Contains(std::string("--nproc-per-node ") + value + ": " + std::to_string(2 * cpus) +
                                      " ranks (" + h1 + " " + std::to_string(cpus) + ", " + h2 + " " +
                                      std::to_string(cpus) + ")"));
  }
  if (!gpus) {
    INFO("--nproc-per-node gpu: no NVIDIA driver on the lab's hosts");
    auto r = run(hvrun_on(lab, home, Args{"--nproc-per-node", "gpu"} + line), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("hvrun: error: --nproc-per-node gpu: " + h1 + " has no GPU that CUDA would show "
                                      "the ranks"));
    CHECK(r.out.empty());
  }
}

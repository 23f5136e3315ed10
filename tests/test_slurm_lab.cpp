// hvrun in a real Slurm cluster (scripts/slurm_lab.sh on a lab): lab host 0 is the login node, hosts
// 1-3 the compute nodes; no sshd runs anywhere. Inside an allocation hvrun takes its hosts, slots and
// -np from it and starts the agents with srun; NIC discovery, supervision and teardown are as over SSH.
// Needs root and Slurm's packages; without them the case says why it skips.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/file_text.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/slurm_cluster.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Polls until `path` holds `needle` `count` times, or the timeout passes.
bool wait_for_file(const fs::path& path, const std::string& needle, int count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (count_of(slurp(path), needle) < count) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

}  // namespace

TEST_CASE("Slurm: hvrun in salloc and sbatch takes the allocation, starts agents with srun, scancel ends all",
          "[lab][slurm]") {
  if (auto why = SlurmCluster::unavailable_reason()) {
    WARN(*why);
    return;
  }
  Lab lab(4);
  for (const char* i : {"0", "1", "2", "3"}) REQUIRE(lab.control({"ssh-stop", i}) == 0);
  SlurmCluster slurm(lab);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2), h3 = lab.host(3);
  const auto ifaces = lab.list("LAB_FABRIC_IFACES");
  const std::string hvrun = hvrun_bin();
  const std::string home_env = "HOME=" + home.dir.string();

  {
    INFO("the allocation's compressed node list gives the hosts, its tasks the slots and -np");
    auto r = run(slurm.on_login({"salloc", "-N", "3", "-n", "6", "sh", "-c",
                                 "echo NODELIST=$SLURM_JOB_NODELIST; exec " + hvrun + " --dry-run true"}),
                 60s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const std::string prefix = lab.var("LAB_PREFIX");
    CHECK_THAT(r.out, Catch::Contains("NODELIST=" + prefix + "-h[1-3]\n"));
    CHECK_THAT(r.out, Catch::Contains("# hvrun dry run: 6 ranks on 3 hosts"));
    CHECK_THAT(r.out, Catch::Contains("# host " + h1 + ": slots 2, ranks 0-1\n# host " + h2 +
                                      ": slots 2, ranks 2-3\n# host " + h3 + ": slots 2, ranks 4-5"));
  }
  {
    INFO("salloc -N 3 -n 6 hvrun, no host flags: two ranks on each node, NIC discovery, agents by srun");
    auto r = run(slurm.on_login({"/usr/bin/env", home_env, "salloc", "-N", "3", "-n", "6", hvrun, "--verbose", "sh",
                                 "-c",
                                 "echo H=$HVRUN_HOSTNAME I=$HVRUN_IFACE; [ $HVRUN_RANK = 5 ] && seq 1 20000; true"}),
                 90s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    for (int i = 1; i <= 3; ++i)
      CHECK(count_of(r.out, "<stdout>:H=" + lab.host(i) + " I=" + ifaces.at(static_cast<std::size_t>(i)) + "\n") == 2);
    CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:H=" + h1) && Catch::Contains("[5]<stdout>:H=" + h3));
    CHECK(count_of(r.out, "[5]<stdout>:") == 20001);  // bulk output passes srun's I/O intact
    CHECK_THAT(r.out, Catch::Contains("[5]<stdout>:20000\n"));
    CHECK(count_of(r.err, "is up (hostname") == 3);
    CHECK(count_of(r.err, ", srun)") == 3);
  }
  const fs::path jobs = home.dir / "jobs";
  fs::create_directories(jobs);
  {
    INFO("hvrun started by sbatch: it runs on the first node (a local agent there), srun for the others");
    const fs::path out = jobs / "batch.out";
    std::ofstream(jobs / "batch.sh") << "#!/bin/sh\nexec " << hvrun
                                     << " sh -c 'echo H=$HVRUN_HOSTNAME R=$HVRUN_RANK/$HVRUN_SIZE'\n";
    auto r = run(slurm.on_login({"/usr/bin/env", home_env, "sbatch", "--wait", "-N", "3", "-n", "6", "-o", out.string(),
                                 "-D", jobs.string(), (jobs / "batch.sh").string()}),
                 90s);
    const std::string text = slurp(out);
    INFO(r.out << r.err << text);
    REQUIRE(r.exit_code == 0);
    CHECK(count_of(text, "<stdout>:H=" + h1 + " R=") == 2);
    CHECK(count_of(text, "<stdout>:H=" + h2 + " R=") == 2);
    CHECK(count_of(text, "<stdout>:H=" + h3 + " R=") == 2);
    CHECK_THAT(text, Catch::Contains("[5]<stdout>:H=" + h3 + " R=5/6"));
  }
  {
    INFO("scancel mid-run: hvrun, srun, the agents and every rank on every node are gone");
    const std::string marker = unique_marker();
    const fs::path out = jobs / "cancel.out";
    std::ofstream(jobs / "cancel.sh") << "#!/bin/sh\nexec " << hvrun << " sh -c 'echo ready; exec sleep 120'\n";
    // The marker is in sbatch's environment, so the batch script, hvrun, srun, the agents and the ranks
    // all inherit it.
    auto r = run(slurm.on_login({"/usr/bin/env", home_env, marker, "sbatch", "--parsable", "-N", "3", "-n", "6", "-o",
                                 out.string(), "-D", jobs.string(), (jobs / "cancel.sh").string()}),
                 60s);
    INFO(r.out << r.err << slurp(out));
    REQUIRE(r.exit_code == 0);
    const std::string job_id = r.out.substr(0, r.out.find_first_of(";\n"));
    REQUIRE(wait_for_file(out, "<stdout>:ready", 6, 60s));
    CHECK(wait_for_marker_count(marker, 6, 5s) >= 6);
    // The job secret (64 hex digits) is in no argv of the job: not srun's, not the agents'.
    static const std::regex hex64("[0-9a-f]{64}");
    const auto job_processes = processes_with_marker(marker);
    CHECK(job_processes.size() >= 12);  // batch script, hvrun, 2 srun, 3 agents, 6 ranks (less the exec'd)
    for (const pid_t pid : job_processes) {
      std::string cmdline = slurp("/proc/" + std::to_string(pid) + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      INFO(pid << ": " << cmdline);
      CHECK_FALSE(std::regex_search(cmdline, hex64));
    }
    auto cancel = run(slurm.on_login({"scancel", job_id}), 30s);
    REQUIRE(cancel.exit_code == 0);
    const auto left = wait_until_gone(marker, 15s);
    CHECK(left.empty());
  }
}

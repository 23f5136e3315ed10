// --mpi on the trap lab (docker0 with 172.17.0.1 on every host, a wifi NIC that reaches nobody, a NIC
// that drops packets, fabric NICs named differently per host): plain mpirun fails there, hvrun --mpi
// runs the same MPI program, and the line hvrun --mpi --dry-run prints works when run by a shell.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "launcher/ranks/mpirun_process.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Every rank's line says the allreduce was right.
void check_ranks(const std::string& out, int size) {
  for (int r = 0; r < size; ++r) {
    CAPTURE(r);
    CHECK(count_of(out, "mpi rank " + std::to_string(r) + " of " + std::to_string(size) + " on ") == 1);
  }
  CHECK(count_of(out, ": sum " + std::to_string(size * (size + 1) / 2) + " ok") == size);
}

// Open MPI's shared-memory transport keeps a file per rank in /dev/shm (vader_segment.HOST.JOB.RANK),
// which a rank removes at MPI_Finalize: a rank killed (the plain mpirun stopped by timeout, a failing
// rank's mpirun aborting the others) leaves its file. The lab's hosts share this machine's /dev/shm;
// their names are this test's own.
struct ShmSegmentsRemoved {
  std::vector<std::string> hosts;
  ~ShmSegmentsRemoved() {
    std::error_code ec;
    for (fs::directory_iterator it("/dev/shm", ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      for (const std::string& host : hosts)
        if (name.starts_with("vader_segment." + host + ".")) {
          std::error_code ignored;
          fs::remove(it->path(), ignored);
        }
    }
  }
};

std::optional<std::string> open_mpi_missing() {
  if (hvrun::find_mpirun() && ::access("/usr/bin/mpicc", X_OK) == 0) return std::nullopt;
  return "skipped: Open MPI's mpirun or mpicc is missing (apt-get install openmpi-bin libopenmpi-dev)";
}

// tests/NAME.c built with mpicc into `home`, where every lab host sees it (the hosts share the file system).
std::string compiled(const TempHome& home, const std::string& name) {
  const std::string prog = (home.dir / name).string();
  auto cc = run({"/usr/bin/mpicc", "-O1", "-o", prog, source_dir() + "/tests/" + name + ".c"}, 120s);
  INFO(cc.err);
  REQUIRE(cc.exit_code == 0);
  return prog;
}

}  // namespace

TEST_CASE("mpi mode runs an MPI program on the trap lab, where plain mpirun fails", "[lab][mpi]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (auto why = open_mpi_missing()) {
    WARN(*why);
    return;
  }
  TempHome home;
  const std::string prog = compiled(home, "mpi_allreduce");

  Lab lab(3, Lab::default_prefix() + "mpi");
  const auto names = lab.list("LAB_HOSTS");
  const ShmSegmentsRemoved segments{{names.begin(), names.end()}};
  const std::string hosts = names[0] + ":2," + names[1] + ":2," + names[2] + ":2";

  {
    INFO("plain mpirun, told only how to reach the hosts (no -mca if_include hand-tuning): fails or hangs "
         "(it tries wlp5s0, which reaches nobody), stopped after 20 s");
    const std::vector<std::string> plain{"timeout", "-s", "TERM", "-k", "5", "20",
                                         "mpirun", "--allow-run-as-root", "-np", "6", "-H", hosts,
                                         "-mca", "plm_rsh_args", lab.var("LAB_SSH_OPTS"), prog};
    auto r = run(lab.on_host(0, plain), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK(count_of(r.out, ": sum 21 ok") < 6);
  }
  {
    INFO("hvrun --mpi: the probes' choice goes to mpirun; every rank's allreduce is right");
    auto r = run(hvrun_on(lab, home, {"--mpi", "-np", "6", "-H", hosts, prog}), 90s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    check_ranks(r.out, 6);
  }
  {
    INFO("--dry-run prints one mpirun line; bash runs it as pasted");
    auto r = run(hvrun_on(lab, home, {"--mpi", "--dry-run", "-np", "6", "-H", hosts, prog}), 60s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(count_of(r.out, "\n") == 1);
    CHECK_THAT(r.out, Catch::StartsWith("mpirun ") && Catch::Contains("btl_tcp_if_include 10.77.0.0/24") &&
                          Catch::Contains("oob_tcp_if_include 10.77.0.0/24"));
    CHECK(r.out.find("mpi rank") == std::string::npos);  // nothing ran
    auto pasted = run(lab.on_host(0, {"/usr/bin/env", "HOME=" + home.dir.string(), "bash", "-c", r.out}), 90s);
    INFO(pasted.out << pasted.err);
    CHECK(pasted.exit_code == 0);
    check_ranks(pasted.out, 6);
  }
  {
    INFO("a rank's failure: mpirun's exit status becomes hvrun's");
    auto r = run(hvrun_on(lab, home, {"--mpi", "-np", "6", "-H", hosts, prog, "4"}), 90s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 3);
  }
}

TEST_CASE("mpi mode observes the ranks mpirun starts: the rank that computes more is named though Open MPI's "
          "waiting ranks poll on a CPU, and a uniform job names nobody", "[lab][mpi]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (auto why = open_mpi_missing()) {
    WARN(*why);
    return;
  }
  TempHome home;
  const std::string prog = compiled(home, "mpi_steps");
  Lab lab(3, Lab::default_prefix() + "mps");
  const auto names = lab.list("LAB_HOSTS");
  const ShmSegmentsRemoved segments{{names.begin(), names.end()}};
  const std::string hosts = names[0] + ":1," + names[1] + ":1," + names[2] + ":1";
  {
    auto r = run(hvrun_on(lab, home, {"--mpi", "-np", "3", "-H", hosts, prog, "14", "1"}), 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "mpi done rank=") == 3);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 1 on " + names[1] + " holds the job back: busy"));
    CHECK_THAT(r.err, !Catch::Contains("rank 0 on " + names[0] + " holds") &&
                          !Catch::Contains("rank 2 on " + names[2] + " holds"));
  }
  {
    auto r = run(hvrun_on(lab, home, {"--mpi", "-np", "3", "-H", hosts, prog, "8", "-1"}), 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "mpi done rank=") == 3);
    CHECK_THAT(r.err, !Catch::Contains("holds the job back"));
  }
}

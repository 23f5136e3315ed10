// --max-restarts on the lab with a real torch DDP program (tests/faults/ddp_restart.py, env://, Gloo)
// as torchrun users run it: a rank SIGKILLed mid-run restarts every rank and the job completes; a spent
// budget ends the job naming the failure; a host cut off mid-run is dropped and, with --min-np, the
// job goes on with fewer ranks; without --min-np it ends naming the host and what to give.
// Without Debian's python3-torch (scripts/horovod.sh installs it) or without root the cases say why
// they skip.
#include <catch2/catch.hpp>
#include <signal.h>

#include <filesystem>
#include <set>
#include <string>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/torch_python.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;

namespace {

const char* const kPython = kTorchPython;  // Debian's, which has torch

std::string program() { return source_dir() + "/tests/faults/ddp_restart.py"; }

// "DDP done rank=R size=S restart=C max=M port=P same=1" lines: rank -> the rest of the line.
std::map<int, std::string> done_lines(const std::string& out) { return rank_lines(out, "DDP done"); }

// Lab hosts 1 and 2 run the job, two ranks each, started from host 0; a marker in every process.
struct RestartLab {
  Lab lab{3};
  TempHome home;
  std::string h1 = lab.host(1), h2 = lab.host(2);
  std::string marker = unique_marker();
};

}  // namespace

TEST_CASE("restarts with torch DDP on lab hosts: a rank killed mid-run restarts every rank, a spent budget ends "
          "the job naming the failure",
          "[lab][restarts]") {
  HVRUN_SKIP_WITHOUT_TORCH_LAB();
  RestartLab t;
  const auto& [lab, home, h1, h2, marker] = t;
  auto job = [&](const std::string& restarts, const std::string& fail_until) {
    return hvrun_on(lab, home,
                    {"--kill-grace", "2", "--max-restarts", restarts, "-np", "4", "-H", h1 + ":2," + h2 + ":2", "-x",
                     "OMP_NUM_THREADS=1", "-x", marker, kPython, program(), "3", fail_until, "12"});
  };
  {
    INFO("rank 3 SIGKILLs itself at step 3 of the first attempt: one restart, then the job completes");
    auto r = run(job("2", "1"), 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto lines = done_lines(r.out);
    CHECK(lines.size() == 4);
    std::set<std::string> ports;
    for (const auto& [rank, rest] : lines) {
      INFO("rank " << rank);
      CHECK_THAT(rest, Catch::StartsWith("size=4 restart=1 max=2 port="));
      CHECK_THAT(rest, Catch::EndsWith(" same=1"));
      ports.insert(rest);
    }
    CHECK(ports.size() == 1);  // one MASTER_PORT for the attempt
    CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:DDP step 3 restart=0"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 3 on " + h2 + " killed by SIGKILL"));
    CHECK_THAT(r.err, Catch::Contains("stopping all ranks to restart them (restart 1 of 2, --max-restarts)"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: restart 1 of 2: 4 ranks started again on "));
    CHECK_THAT(r.err, Catch::Contains(" s after the failure"));
    CHECK(count_of(r.err, "to restart them") == 1);
    CHECK(wait_until_gone(marker, 2s).empty());
  }
  {
    INFO("rank 3 dies in every attempt and one restart is allowed: the second failure ends the job, named");
    auto r = run(job("1", "9"), 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 128 + SIGKILL);  // the last attempt's failure
    CHECK(done_lines(r.out).empty());
    CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:DDP step 3 restart=1"));
    CHECK_THAT(r.err, Catch::Contains("restart 1 of 1: 4 ranks started again"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 3 on " + h2 + ": killed by SIGKILL"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: no restart left: all 1 of --max-restarts were used"));
    CHECK(wait_until_gone(marker, 2s).empty());
  }
}

TEST_CASE("restarts with torch DDP on lab hosts: a host cut off mid-run is dropped, with --min-np the ranks "
          "restart on the hosts left, without it the job ends naming the host",
          "[lab][restarts][faults]") {
  HVRUN_SKIP_WITHOUT_TORCH_LAB();
  RestartLab t;
  const auto& [lab, home, h1, h2, marker] = t;
  auto job = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"--kill-grace", "2", "--heartbeat-timeout", "3", "--max-restarts", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    // localhost's slot is left unused by -np 4: it gets no agent, so no restart may place a rank there.
    for (const std::string& a : {std::string("-np"), std::string("4"), std::string("-H"),
                                 h1 + ":2," + h2 + ":2,localhost:1",
                                 std::string("-x"), std::string("OMP_NUM_THREADS=1"), std::string("-x"), marker,
                                 std::string(kPython), program(), std::string("0"), std::string("0"),
                                 std::string("60")})
      args.push_back(a);
    return hvrun_on(lab, home, args);
  };
  // Runs the job, cuts lab host 2 off once rank 0 is at step 2, and reconnects it when hvrun ends.
  auto cut_mid_run = [&](std::vector<std::string> extra) {
    ChildProcess hvrun(job(std::move(extra)));
    REQUIRE(hvrun.wait_for_stdout("DDP step 2 restart=0", 1, 180s));
    REQUIRE(lab.control({"cut", "2"}) == 0);
    auto r = hvrun.wait(240s);
    lab.control({"uncut", "2"});
    return r;
  };
  {
    INFO("--min-np 2: lab host 2 is cut off at step 2; rank 0's host goes on alone with 2 ranks");
    auto r = cut_mid_run({"--min-np", "2"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto lines = done_lines(r.out);
    CHECK(lines.size() == 2);
    for (const auto& [rank, rest] : lines) {
      INFO("rank " << rank);
      CHECK_THAT(rest, Catch::StartsWith("size=2 restart=1 max=1 port="));
    }
    CHECK_THAT(r.err, Catch::Contains("hvrun: lost the agent on " + h2));
    CHECK_THAT(r.err, Catch::Contains("stopping all ranks to restart them (restart 1 of 1, --max-restarts)"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: restart 1 of 1: 2 ranks started again on " + h1 + ", "));
    CHECK(wait_until_gone(marker, 5s).empty());
  }
  {
    INFO("without --min-np: the 2 slots left cannot hold -np 4, so the job ends at once, saying what to give");
    auto r = cut_mid_run({});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("hvrun: lost the agent on " + h2));
    CHECK_THAT(r.err, Catch::Contains("; no restart: without " + h2 + " the hosts have 2 slots, fewer than the job's "
                                      "4 ranks; give --min-np N to restart with fewer ranks"));
    CHECK(count_of(r.err, "to restart them") == 0);
    CHECK(wait_until_gone(marker, 5s).empty());
  }
}

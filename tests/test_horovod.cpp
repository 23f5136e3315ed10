// A real Horovod 0.28.1 (PyTorch + Gloo, installed by scripts/horovod.sh) runs unchanged under hvrun:
// tests/horovod/hvd_checks.py across three lab hosts (rendezvous, topology, collectives, training,
// a failing rank), and the same program under the real horovodrun on this machine as the anchor.
// Without the installed Horovod (or without root, for the lab) the cases say why they skip.
#include <catch2/catch.hpp>
#include <signal.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const char* const kPython = "/usr/bin/python3";  // Debian's, which has torch; not whatever PATH finds first

std::string horovod_dir() {
  const char* d = std::getenv("HVRUN_HOROVOD_DIR");
  return d != nullptr && *d != '\0' ? d : "/opt/horovod";
}

std::string checks_program() { return source_dir() + "/tests/horovod/hvd_checks.py"; }

std::optional<std::string> horovod_unavailable() {
  if (!fs::exists(fs::path(horovod_dir()) / "site/horovod/torch"))
    return "no Horovod in " + horovod_dir() +
           " (scripts/horovod.sh installs it from ../shared/horovod/horovod-*.tar.xz; scripts/test.sh runs it)";
  if (!fs::exists(kPython)) return std::string(kPython) + " is missing (Debian's python3-torch needs it)";
  return std::nullopt;
}

// The checks' lines by kind and rank: "[R]<stdout>:HVD kind rank=R k=v ..." → lines[kind][R] = {k: v}.
using Fields = std::map<std::string, std::string>;
std::map<std::string, std::map<int, Fields>> checks_of(const std::string& out) {
  static const std::regex line(R"(\[(\d+)\]<stdout>:HVD (\w+) rank=(\d+)((?: \w+=\S*)*))");
  static const std::regex field(R"((\w+)=(\S*))");
  std::map<std::string, std::map<int, Fields>> lines;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
    const auto& m = *it;
    CHECK(m[1].str() == m[3].str());  // the launcher's rank prefix is Horovod's rank
    Fields f;
    const std::string rest = m[4].str();
    for (std::sregex_iterator ft(rest.begin(), rest.end(), field); ft != end; ++ft) f[(*ft)[1].str()] = (*ft)[2].str();
    lines[m[2].str()][std::stoi(m[1].str())] = f;
  }
  return lines;
}

// What every rank of `hosts` hosts × `per_host` ranks must have printed. Returns the ranks' init_ms.
std::vector<int> check_every_rank(const std::string& out, int hosts, int per_host, const std::string& rendezvous) {
  const int size = hosts * per_host;
  const auto lines = checks_of(out);
  const std::string each = std::to_string(size * (size + 1) / 2);  // the sum of rank + 1 over the ranks
  const std::string sum = each + "," + each + "," + each + "," + each;
  std::string rows, digest;
  double average = 0;
  for (int r = 0; r < size; ++r) {
    rows += ";" + std::to_string(r) + "," + std::to_string(r * r);
    average += r;
  }
  average /= size;
  std::vector<int> init_ms;
  for (const char* kind : {"topology", "allreduce", "allgather", "broadcast", "trained"}) {
    INFO("check " << kind);
    REQUIRE(lines.count(kind) == 1);
    CHECK(lines.at(kind).size() == static_cast<std::size_t>(size));
  }
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r);
    const Fields& t = lines.at("topology").at(r);
    CHECK(t.at("size") == std::to_string(size));
    CHECK(t.at("local_rank") == std::to_string(r % per_host));
    CHECK(t.at("local_size") == std::to_string(per_host));
    CHECK(t.at("cross_rank") == std::to_string(r / per_host));
    CHECK(t.at("cross_size") == std::to_string(hosts));
    if (!rendezvous.empty()) CHECK(t.at("rendezvous") == rendezvous);
    init_ms.push_back(std::stoi(t.at("init_ms")));
    CHECK(lines.at("allreduce").at(r).at("sum") == sum);
    CHECK(std::stod(lines.at("allreduce").at(r).at("average")) == Approx(average));
    CHECK(lines.at("allgather").at(r).at("rows") == rows.substr(1));
    CHECK(lines.at("broadcast").at(r).at("values") ==
          std::to_string(10 * (size - 1)) + "," + std::to_string(10 * (size - 1) + 1) + "," +
              std::to_string(10 * (size - 1) + 2));
    // Every rank started from its own random parameters and trained on its own data: equal digests
    // mean the broadcast and the averaged gradients really went through Horovod.
    const std::string d = lines.at("trained").at(r).at("params");
    if (r == 0) digest = d;
    CHECK(d == digest);
  }
  return init_ms;
}

// hvrun's argv for 4 Horovod ranks of tests/faults/PROGRAM on lab hosts 1 and 2 (two each), with `arg`.
std::vector<std::string> four_rank_job(const Lab& lab, const TempHome& home, const std::string& marker,
                                       const std::string& program, const std::string& arg) {
  return hvrun_on(lab, home,
                  {"--verbose", "--kill-grace", "2", "-np", "4", "-H", lab.host(1) + ":2," + lab.host(2) + ":2", "-x",
                   "PYTHONPATH=" + horovod_dir() + "/site", "-x", "OMP_NUM_THREADS=1", "-x", marker, kPython,
                   source_dir() + "/tests/faults/" + program, arg});
}

std::string summary(const std::vector<int>& ms) {
  std::string s;
  for (int v : ms) s += (s.empty() ? "" : " ") + std::to_string(v);
  return s;
}

}  // namespace

TEST_CASE("Horovod across three lab hosts: rendezvous, topology, collectives, training, a failing rank",
          "[lab][horovod]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (auto why = horovod_unavailable()) {
    WARN("Horovod tests skipped: " << *why);
    return;
  }
  Lab lab(3);
  TempHome home;
  const std::string hosts = "localhost:2," + lab.host(1) + ":2," + lab.host(2) + ":2";
  const std::string marker = unique_marker();
  const std::vector<std::string> env{"-x", "PYTHONPATH=" + horovod_dir() + "/site", "-x", "OMP_NUM_THREADS=1",
                                     "-x", marker};
  auto args = [&](std::vector<std::string> tail) {
    std::vector<std::string> a{"--verbose", "-np", "6", "-H", hosts};
    a.insert(a.end(), env.begin(), env.end());
    a.insert(a.end(), tail.begin(), tail.end());
    return a;
  };

  {
    INFO("the program runs unchanged: hvrun gives the rendezvous and horovodrun's environment");
    auto r = run(hvrun_on(lab, home, args({kPython, checks_program()})), 180s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    // The rendezvous is on rank 0's host's chosen NIC (the lab's fabric), never docker0 or loopback.
    const auto init_ms = check_every_rank(r.out, 3, 2, lab.list("LAB_FABRIC_ADDRS").at(0));
    CHECK_THAT(r.err, Catch::Contains("Horovod's Gloo rendezvous is at " + lab.list("LAB_FABRIC_ADDRS").at(0)));
    WARN("hvd.init() on 6 ranks over 3 lab hosts, ms per rank: " << summary(init_ms) << "; whole run "
                                                                 << r.elapsed.count() << " ms");
  }
  {
    INFO("a rank that fails mid-run ends the job like any program's: its code, its name, nothing left");
    auto r = run(hvrun_on(lab, home, args({"--kill-grace", "2", kPython, checks_program(), "fail", "3"})), 180s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 7);
    CHECK_THAT(r.err, Catch::Contains("rank 3 on " + lab.host(1) + ": exited with code 7"));
    CHECK_THAT(r.err, Catch::Contains("rank 3 fails on purpose"));
    CHECK(wait_until_gone(marker, 2s).empty());
    CHECK(agents_left(agent_pids(r.err), 2s).empty());
  }
  {
    INFO("--max-restarts 1: the failure restarts all 6 ranks, which hvd.init() again on a fresh rendezvous and "
         "reach the same failure, which ends the job");
    auto r = run(hvrun_on(lab, home,
                          args({"--kill-grace", "2", "--max-restarts", "1", kPython, checks_program(), "fail", "3"})),
                 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 7);
    CHECK(count_of(r.out, "<stdout>:HVD allreduce rank=") == 12);  // both attempts got through hvd.init()
    CHECK(count_of(r.err, "Horovod's Gloo rendezvous is at ") == 2);
    CHECK_THAT(r.err, Catch::Contains("restart 1 of 1: 6 ranks started again"));
    CHECK_THAT(r.err, Catch::Contains("no restart left: all 1 of --max-restarts were used"));
    CHECK(wait_until_gone(marker, 2s).empty());
    CHECK(agents_left(agent_pids(r.err), 2s).empty());
  }
}

TEST_CASE("Horovod hang: Ctrl-C shows where every rank is, the stuck one apart, then stops them all within the "
          "grace",
          "[lab][horovod]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (auto why = horovod_unavailable()) {
    WARN("Horovod tests skipped: " << *why);
    return;
  }
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string marker = unique_marker();
  ChildProcess hvrun(four_rank_job(lab, home, marker, "hvd_hang.py", "2"));
  REQUIRE(hvrun.wait_for_stdout("<stdout>:ready", 4, 120s));
  // Ranks 0, 1 and 3 print "stepping" just before their first allreduce; on a loaded 2-core CI machine
  // a fixed pause after "ready" was not always enough for all three to be inside it.
  REQUIRE(hvrun.wait_for_stdout("<stdout>:stepping", 3, 60s));
  hvrun.pump_for(1500ms);  // ranks 0, 1 and 3 wait in their allreduce, rank 2 in its wait
  const auto t0 = std::chrono::steady_clock::now();
  hvrun.signal(SIGINT);
  auto r = hvrun.wait(30s);
  const auto teardown = std::chrono::steady_clock::now() - t0;
  INFO(r.out << r.err);
  CHECK(r.exit_code == 128 + SIGINT);
  CHECK_THAT(r.err, Catch::Contains("hvrun: where the 4 running ranks are:\nhvrun: ranks 0,1,3 on " + h1 + ", " + h2 +
                                    ": in "));
  CHECK_THAT(r.err, Catch::Matches("[\\s\\S]*hvrun: ranks 0,1,3 on [^\\n]*allreduce[^\\n]*\u2190 train_step at "
                                   "hvd_hang.py:18 \u2190[\\s\\S]*"));
  CHECK_THAT(r.err, Catch::Contains("hvrun: rank 2 on " + h2 + ": in wait_for_shard at hvd_hang.py:14 \u2190 <module> "
                                    "at hvd_hang.py:23\n"));
  CHECK(teardown < 2s + 1s);
  CHECK(wait_until_gone(marker, 2s).empty());
  CHECK(agents_left(agent_pids(r.err), 2s).empty());
}

TEST_CASE("Horovod crash: a rank segfaulting through ctypes on a remote host shows its Python frame, the fault "
          "address and its native stack",
          "[lab][horovod]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (auto why = horovod_unavailable()) {
    WARN("Horovod tests skipped: " << *why);
    return;
  }
  Lab lab(3);
  TempHome home;
  const std::string h2 = lab.host(2);
  const std::string marker = unique_marker();
  const std::string program = source_dir() + "/tests/faults/hvd_crash.py";
  auto r = run(four_rank_job(lab, home, marker, "hvd_crash.py", "3"), 180s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 128 + SIGSEGV);
  CHECK_THAT(r.err, Catch::Contains("hvrun: rank 3 on " + h2 + ": killed by SIGSEGV at address 0x0; its last stderr "
                                    "lines:"));
  CHECK_THAT(r.err, Catch::Contains("    Fatal Python error: Segmentation fault"));
  CHECK_THAT(r.err, Catch::Contains("      File \"" + program + "\", line 15 in poison_batch"));
  CHECK_THAT(r.err, Catch::Contains("    hvrun-crash: pid "));
  CHECK_THAT(r.err, Catch::Contains("ffi_call+0x"));
  CHECK_THAT(r.err, Catch::Contains("hvrun: stopping the other 3 ranks"));
  CHECK(wait_until_gone(marker, 2s).empty());
  CHECK(agents_left(agent_pids(r.err), 2s).empty());
}

TEST_CASE("Horovod anchor: the same program under the real horovodrun on this machine", "[integration][horovod]") {
  if (auto why = horovod_unavailable()) {
    WARN("Horovod tests skipped: " << *why);
    return;
  }
  // horovodrun starts local ranks without SSH for localhost; it needs no root and no lab.
  auto r = run({kPython, horovod_dir() + "/bin/horovodrun", "--gloo", "-np", "2", "-H", "localhost:2", kPython,
                checks_program()},
               120s, {"PYTHONPATH=" + horovod_dir() + "/site", "OMP_NUM_THREADS=1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  check_every_rank(r.out, 1, 2, "");
}

TEST_CASE("Horovod straggler on one host: the rank that computes more is named, the others read as waiting "
          "though Horovod's synchronize polls on a CPU, and a uniform job names nobody",
          "[integration][horovod]") {
  if (auto why = horovod_unavailable()) {
    WARN("Horovod tests skipped: " << *why);
    return;
  }
  auto job = [](const std::string& seconds, const std::string& slow) {
    return run({hvrun_bin(), "--rank-table", "-np", "3", "-H", "localhost:3", "-x",
                "PYTHONPATH=" + horovod_dir() + "/site", "-x", "OMP_NUM_THREADS=1", kPython,
                source_dir() + "/tests/faults/hvd_steps.py", seconds, slow},
               120s);
  };
  {
    const auto r = job("12", "1");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(count_of(r.out, "hvd done rank=") == 3);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 1 on localhost holds the job back: busy"));
    CHECK_THAT(r.err, !Catch::Contains("rank 0 on localhost holds") && !Catch::Contains("rank 2 on localhost holds"));
    // The table's waiting column: the polling ranks wait most of their time, the slow one little.
    const auto waiting = [&](int rank) {
      const std::regex row("hvrun:   localhost +" + std::to_string(rank) + R"( +[0-9.]+ s +[0-9.]+ s +([0-9]+) %)");
      std::smatch m;
      return std::regex_search(r.err, m, row) ? std::stoi(m[1]) : -1;
    };
    CHECK(waiting(0) >= 50);
    CHECK(waiting(2) >= 50);
    CHECK(waiting(1) >= 0);
    CHECK(waiting(1) < 30);
  }
  {
    const auto r = job("8", "-1");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err, !Catch::Contains("holds the job back"));
  }
}

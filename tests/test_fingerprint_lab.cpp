// The odd host out, before any rank starts, on a network-namespace lab: each host's view of the files
// is changed through a mount namespace of its sshd (lab.sh bind): a stale script, another torch (its
// package metadata), a missing script. hvrun runs on host 0 and its ranks on hosts 0, 1 and 2. Needs
// root; without it the case says why it skips.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/base/host_names.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using hvrun::testing::write_text;

TEST_CASE("fingerprints across lab hosts: a stale script and another torch are named, a missing script refuses",
          "[lab][fingerprint]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  SharedDir shared("fingerprint");
  const std::string h0 = lab.host(0), h1 = lab.host(1), h2 = lab.host(2);
  const fs::path work = shared.dir / "work", script = work / "train.py";
  write_text(script, "print('trained')\n");
  write_text(shared.dir / "stale/train.py", "print('an older copy')\n");
  write_text(shared.dir / "site/torch-1.13.0.dist-info/METADATA", "Name: torch\nVersion: 1.13.0\n");
  write_text(shared.dir / "other-torch/METADATA", "Name: torch\nVersion: 1.12.1\n");
  fs::create_directories(shared.dir / "empty");
  const std::vector<std::string> job{"-H", h0 + "," + h1 + "," + h2, "-x", "PYTHONPATH=" + (shared.dir / "site").string(),
                                     "/usr/bin/python3", script.string()};

  {
    INFO("every host the same: nothing is said, the job runs");
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:trained") == 3);
    CHECK(count_of(r.err, "hosts differ") == 0);
  }
  {
    INFO("host 2 has a stale train.py, host 1 another torch: both named, the others folded, the job still runs");
    REQUIRE(lab.control({"bind", "2", (shared.dir / "stale/train.py").string(), script.string()}) == 0);
    REQUIRE(lab.control({"bind", "1", (shared.dir / "other-torch/METADATA").string(),
                         (shared.dir / "site/torch-1.13.0.dist-info/METADATA").string()}) == 0);
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("hvrun: hosts differ: " + h2 + ": train.py differs (sha256 ") &&
                          Catch::Contains("); " + hvrun::fold_names({h0, h1}) + ": sha256 "));
    CHECK_THAT(r.err, Catch::Contains("hvrun: hosts differ: " + h1 + ": torch 1.12.1; " + hvrun::fold_names({h0, h2}) +
                                      ": 1.13.0\n"));
    CHECK(count_of(r.out, "<stdout>:trained") == 2);
    CHECK(count_of(r.out, "<stdout>:an older copy") == 1);
  }
  {
    INFO("host 2 has no train.py: refused before any rank starts, exit 2, the host and the path named");
    REQUIRE(lab.control({"bind", "2", (shared.dir / "empty").string(), work.string()}) == 0);
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("hvrun: error: " + h2 + ": the script " + script.string() +
                                      " cannot be read there (No such file or directory); copy it there (--sync " +
                                      work.string() + " does), or start hvrun from a directory every host shares"));
    CHECK(r.out.empty());  // no rank ran anywhere
  }
  {
    INFO("--check-only with the command shows the same, without starting ranks");
    std::vector<std::string> check{"--check-only"};
    check.insert(check.end(), job.begin(), job.end());
    auto r = run(hvrun_on(lab, home, check), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(h2 + ": the script " + script.string() + " cannot be read there"));
    CHECK(count_of(r.out, "trained") == 0);
  }
}

TEST_CASE("a host whose interpreter takes 4 s to start costs its fingerprint 4 s, and no probe fails",
          "[lab][fingerprint][timing]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  SharedDir shared("slowpython");
  const std::string h0 = lab.host(0), h1 = lab.host(1), h2 = lab.host(2);
  // Every host runs python3 from bin/ on the job's PATH; host 1's sleeps 4 s before it starts the real one
  // (the agent's fingerprint asks it for its version while the launcher probes every host's NICs).
  const fs::path bin = shared.dir / "bin", python = bin / "python3", slow = shared.dir / "slow/python3";
  write_text(python, "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n");
  write_text(slow, "#!/bin/sh\nsleep 4\nexec /usr/bin/python3 \"$@\"\n");
  fs::permissions(python, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(slow, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  write_text(shared.dir / "train.py", "import sys\nprint('trained', sys.version_info[0])\n");
  REQUIRE(lab.control({"bind", "1", slow.string(), python.string()}) == 0);
  auto r = run(hvrun_on(lab, home,
                        {"--verbose", "-H", h0 + "," + h1 + "," + h2, "-x", "PATH=" + bin.string() + ":/usr/bin:/bin",
                         "python3", (shared.dir / "train.py").string()}),
               90s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.out, "<stdout>:trained 3") == 3);
  CHECK_THAT(r.err, Catch::Contains("probing "));
  CHECK(count_of(r.err, "addresses again") == 0);  // every probe answered the first time
  for (const std::string& h : {h0, h1, h2}) CHECK(count_of(r.err, h + " uses ") >= 1);  // no host dropped
  CHECK(count_of(r.err, "hosts differ") == 0);  // host 1's interpreter answered: the same Python
}

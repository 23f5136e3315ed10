// --sync on a network-namespace lab: each host's view of the job's directory is its own through a mount
// namespace of its sshd (lab.sh bind): host 1 holds a stale copy that lacks a file, host 2 an empty
// directory. hvrun runs on host 0, whose directory is the source. Counted: which files and bytes go to
// which host, that a file already there is not rewritten, that --check-only copies nothing, and that a
// copy that cannot be made ends the job before any rank starts, naming the host and the file (the fault
// catalogue's entry for --sync). Needs root; without it the case says why it skips.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "launcher/base/host_names.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/neighbour_user.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using hvrun::testing::read_text;
using hvrun::testing::write_text;

namespace {

ino_t inode_of(const fs::path& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

TEST_CASE("sync across lab hosts: only what differs is sent, bytes counted, --check-only sends nothing, a "
          "copy that fails names host and file",
          "[lab][sync][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  SharedDir shared("sync");
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const fs::path work = shared.dir / "work", stale = shared.dir / "stale", empty = shared.dir / "empty";
  const std::string train = "import os\nd = os.path.dirname(os.path.abspath(__file__))\n"
                            "import sys; sys.path.insert(0, os.path.join(d, 'lib')); import util\n"
                            "print('trained', util.N, os.path.getsize(os.path.join(d, 'data.bin')))\n";
  const std::string util = "N = 42\n";
  const std::string data(100'000, 'd');
  write_text(work / "train.py", train);
  write_text(work / "lib/util.py", util);
  write_text(work / "data.bin", data);
  write_text(stale / "train.py", "print('an older copy')\n");
  write_text(stale / "data.bin", data);  // the same: not sent again
  fs::create_directories(empty);
  REQUIRE(lab.control({"bind", "1", stale.string(), work.string()}) == 0);
  REQUIRE(lab.control({"bind", "2", empty.string(), work.string()}) == 0);
  const ino_t stale_data = inode_of(stale / "data.bin");
  const std::size_t to_h1 = train.size() + util.size(), to_h2 = train.size() + util.size() + data.size();
  const std::vector<std::string> job{"-H", lab.host(0) + "," + h1 + "," + h2, "--sync", work.string(),
                                     "/usr/bin/python3", (work / "train.py").string()};

  {
    INFO("--check-only says what would be sent, and sends nothing");
    std::vector<std::string> check{"--check-only"};
    check.insert(check.end(), job.begin(), job.end());
    auto r = run(hvrun_on(lab, home, check), 60s);
    INFO(r.out << r.err);
    CHECK_THAT(r.err, Catch::Contains("hvrun: --sync: would send 2 files, " + std::to_string(to_h1) + " bytes, to " +
                                      h1 + "; would send 3 files, " + std::to_string(to_h2) + " bytes, to " + h2));
    CHECK(r.exit_code == 0);  // the script missing on host 2 is one --sync would send: not refused
    CHECK(count_of(r.err, "hosts differ") == 0);
    CHECK(read_text(stale / "train.py") == "print('an older copy')\n");
    CHECK(fs::is_empty(empty));
  }
  {
    INFO("the run sends host 1 the changed and the missing file, host 2 all three; every rank sees the same files");
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("hvrun: --sync: sent 2 files, " + std::to_string(to_h1) + " bytes, to " + h1 +
                                      "; sent 3 files, " + std::to_string(to_h2) + " bytes, to " + h2));
    CHECK(count_of(r.err, "hosts differ") == 0);
    CHECK(count_of(r.out, "<stdout>:trained 42 100000") == 3);
    CHECK(read_text(stale / "train.py") == train);
    CHECK(read_text(stale / "lib/util.py") == util);
    CHECK(inode_of(stale / "data.bin") == stale_data);  // not rewritten
    CHECK(read_text(empty / "data.bin") == data);
    CHECK(fs::status(empty / "train.py").permissions() == fs::status(work / "train.py").permissions());
    for (const auto& e : fs::recursive_directory_iterator(shared.dir))  // no temporary left behind
      CHECK_THAT(e.path().string(), !Catch::Contains(".tmp-"));
  }
  {
    INFO("a second run finds every host up to date and sends nothing");
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("have all 3 files already"));
    CHECK(count_of(r.err, "sent ") == 0);
    CHECK(count_of(r.out, "<stdout>:trained 42 100000") == 3);
  }
  {
    INFO("a file where --sync needs a directory: the job ends before any rank starts, host and file named");
    fs::remove_all(empty / "lib");
    write_text(empty / "lib", "a file, not a directory\n");
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    const std::string util_py = (work / "lib/util.py").string();
    CHECK_THAT(r.err, Catch::Contains("hvrun: --sync: " + h2 + ": upload of " + util_py + " to " + util_py +
                                      " failed (" + (work / "lib").string() + " exists and is not a directory); check "
                                      "that host's disk and permissions, or copy the files there yourself\n"));
    CHECK(count_of(r.out, "trained") == 0);
  }
  {
    INFO("a --sync directory with no file in it: said, and the job runs");
    const fs::path none = shared.dir / "none";
    fs::create_directories(none / "sub");
    auto r = run(hvrun_on(lab, home, {"-H", lab.host(0) + "," + h1, "--sync", none.string(), "true"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("hvrun: --sync: no files under " + none.string() + "; nothing to send\n"));
  }
}

TEST_CASE("sync on a shared host: a target another user made is refused, host and path named, and a link planted "
          "where a file or a directory goes is not followed",
          "[lab][sync][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(2);
  TempHome home;
  SharedDir shared("syncsafe");
  NeighbourUser user(std::string(std::getenv("HVRUN_TEST_LAB_PREFIX") != nullptr ? std::getenv("HVRUN_TEST_LAB_PREFIX")
                                                                                 : "hv") + "-sync");
  const std::string h1 = lab.host(1), uid = "uid " + std::to_string(user.uid());
  const fs::path work = shared.dir / "work", theirs = shared.dir / "theirs", outside = shared.dir / "outside",
                 outside_dir = shared.dir / "outside-dir";
  write_text(work / "train.py", "print('ran')\n");
  write_text(work / "lib/util.py", "N = 1\n");
  write_text(outside, "precious\n");
  fs::create_directories(theirs);
  fs::create_directories(outside_dir);
  REQUIRE(lab.control({"bind", "1", theirs.string(), work.string()}) == 0);  // host 1 sees `theirs` at `work`
  const std::vector<std::string> job{"-H", lab.host(0) + "," + h1, "--sync", work.string(), "/usr/bin/python3",
                                     (work / "train.py").string()};
  const auto failed_with = [&](const std::string& why) {
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("hvrun: --sync: " + h1 + ": upload of ") && Catch::Contains(" failed (" + why + ")"));
    CHECK(count_of(r.out, "ran") == 0);
  };
  {
    INFO("the target directory made by the neighbour: refused, host and path named, nothing written in it");
    user.give(theirs.string());
    failed_with(work.string() + " is owned by " + uid + ", not by you or root: hvrun writes only in directories that "
                "are yours; use another directory, or have its owner remove it and let hvrun make it");
    CHECK(fs::is_empty(theirs));
    REQUIRE(::chown(theirs.c_str(), 0, 0) == 0);
  }
  {
    INFO("a link where train.py goes: refused, its target untouched");
    fs::create_symlink(outside, theirs / "train.py");
    failed_with((work / "train.py").string() + " is a symbolic link: hvrun writes no file through a link; remove it");
    CHECK(read_text(outside) == "precious\n");
    fs::remove(theirs / "train.py");
  }
  {
    INFO("a link of the neighbour's where lib/ goes: refused, nothing written where it points");
    fs::remove_all(theirs / "lib");
    fs::create_symlink(outside_dir, theirs / "lib");
    REQUIRE(::lchown((theirs / "lib").c_str(), user.uid(), user.gid()) == 0);
    failed_with((work / "lib").string() + " is a symbolic link owned by " + uid + ": hvrun follows only links that "
                "are yours or root's; remove it, or name the directory it points to yourself");
    CHECK(fs::is_empty(outside_dir));
    fs::remove(theirs / "lib");
  }
  {
    INFO("a directory where train.py goes: refused, named");
    fs::create_directories(theirs / "train.py");
    failed_with((work / "train.py").string() + " exists and is not a regular file; remove it");
    fs::remove_all(theirs / "train.py");
  }
  {
    INFO("with nothing in the way, the same job syncs and runs");
    auto r = run(hvrun_on(lab, home, job), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:ran") == 2);
    CHECK(read_text(theirs / "lib/util.py") == "N = 1\n");
    CHECK(read_text(outside) == "precious\n");
  }
}

// Files hvrun makes where other users share the host (issue 41): common/checked_directory.hpp's rule and
// the places that use it here, --output-filename (launcher/output/output_mux.hpp), torchrun's --log-dir
// (rank_logs.hpp), the probe cache (launcher/nic/nic_cache.hpp), the crash handler's $TMPDIR
// (agent/rank_tools.hpp) and --sync's check of what a host holds (agent/sync_check.hpp). A path another
// user owns needs a second Unix user (tests/support/neighbour_user.hpp), so root; those cases say why
// they skip without it.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "agent/rank_tools.hpp"
#include "agent/sync_check.hpp"
#include "common/checked_directory.hpp"
#include "common/file_digest.hpp"
#include "launcher/check/check_html.hpp"
#include "launcher/nic/nic_cache.hpp"
#include "launcher/output/output_mux.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/neighbour_user.hpp"

using hvrun::CheckedDirectory;
using hvrun::OutputMux;
using hvrun::OutputOptions;
using hvrun::OutputStream;
using hvrun::RankLogOptions;
using hvrun::RankLogs;
using hvrun::testing::read_text;
using hvrun::testing::TempDir;
using hvrun::testing::write_text;
using hvrun::test::NeighbourUser;
namespace fs = std::filesystem;

namespace {

std::string tag() {
  const char* prefix = std::getenv("HVRUN_TEST_LAB_PREFIX");
  return std::string(prefix != nullptr && *prefix != '\0' ? prefix : "hv") + "-files";
}

// The neighbour, or nothing (the caller skips) without root.
std::unique_ptr<NeighbourUser> neighbour() {
  if (::geteuid() != 0) return nullptr;
  return std::make_unique<NeighbourUser>(tag());
}

struct timespec mtime_of(const fs::path& p) {
  struct stat st{};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mtim;
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// A file outside every directory hvrun is given, that a planted link points to: it must stay as it is.
struct Outside {
  fs::path path;
  struct timespec mtime{};
  explicit Outside(const fs::path& p) : path(p) {
    write_text(path, "precious\n");
    mtime = mtime_of(path);
  }
  bool untouched() const { return read_text(path) == "precious\n" && same_time(mtime_of(path), mtime); }
};

OutputMux output_to(const fs::path& dir) { return OutputMux(1, OutputOptions{dir.string(), false, 1, 2, 10}); }

std::string owned_by(const std::string& path, const NeighbourUser& user) {
  return path + " is owned by " + user.name() + " (uid " + std::to_string(user.uid()) +
         "), not by you or root: hvrun writes only in directories that are yours; use another directory, or have "
         "its owner remove it and let hvrun make it";
}

std::string writable(const std::string& path, const char* mode) {
  return path + " has mode " + mode + ", writable by others than its owner: hvrun writes only in directories no "
         "one else can write in; run chmod go-w " + path + ", or use another directory";
}

}  // namespace

TEST_CASE("checked directory: whose and which modes pass, and the words of each refusal") {
  using hvrun::directory_refusal;
  using hvrun::link_refusal;
  CHECK(directory_refusal("/d", 1000, 5000, S_IFDIR | 0755, 1000, false).empty());
  CHECK(directory_refusal("/d", 0, 5000, S_IFDIR | 0755, 1000, false).empty());           // root's
  CHECK(directory_refusal("/tmp", 0, 5000, S_IFDIR | 01777, 1000, false).empty());        // root's and sticky
  CHECK(directory_refusal("/d", 1001, 5000, S_IFDIR | 0700, 1000, false) ==
        "/d is owned by uid 1001, not by you or root: hvrun writes only in directories that are yours; use another "
        "directory, or have its owner remove it and let hvrun make it");
  CHECK(directory_refusal("/d", 1000, 5000, S_IFDIR | 0775, 1000, false) == writable("/d", "0775"));
  CHECK(directory_refusal("/d", 1000, 5000, S_IFDIR | 01777, 1000, false) == writable("/d", "1777"));  // sticky, not root's
  CHECK(directory_refusal("/d", 0, 5000, S_IFDIR | 0757, 1000, false) == writable("/d", "0757"));     // root's, not sticky
  // Group-writable: only in a group no one but the user can be in (a user private group, umask 002).
  const auto private_5000 = [](gid_t g) { return g == 5000; };
  CHECK(directory_refusal("/d", 1000, 5000, S_IFDIR | 0775, 1000, false, private_5000).empty());
  CHECK(directory_refusal("/d", 1000, 5001, S_IFDIR | 0775, 1000, false, private_5000) == writable("/d", "0775"));
  CHECK(directory_refusal("/d", 1000, 5000, S_IFDIR | 0777, 1000, false, private_5000) == writable("/d", "0777"));
  CHECK(directory_refusal("/d", 0, 5000, S_IFDIR | 0775, 1000, false, private_5000) == writable("/d", "0775"));
  CHECK(link_refusal("/l", 1000, 1000, false).empty());
  CHECK(link_refusal("/l", 0, 1000, false).empty());
  CHECK(link_refusal("/l", 1001, 1000, false) ==
        "/l is a symbolic link owned by uid 1001: hvrun follows only links that are yours or root's; remove it, or "
        "name the directory it points to yourself");
}

TEST_CASE("checked directory: a file where a directory goes, a directory where a file goes, '..' below it") {
  TempDir tmp;
  write_text(tmp.path() / "plain", "x");
  CHECK_THROWS_WITH(CheckedDirectory::open((tmp.path() / "plain").string(), 0750, "--flag"),
                    "--flag: " + (tmp.path() / "plain").string() +
                        " exists and is not a directory; remove it or use another directory");
  const CheckedDirectory dir = CheckedDirectory::open(tmp.path().string(), 0750, "--flag");
  CHECK_THROWS_WITH(dir.below("plain/x", 0750), "--flag: " + (tmp.path() / "plain").string() +
                                                    " exists and is not a directory; remove it or use another directory");
  CHECK_THROWS_WITH(dir.below("a/../b", 0750),
                    "--flag: 'a/../b' below " + tmp.path().string() + " has a '..' component");
  fs::create_directories(tmp.path() / "sub");
  CHECK_THROWS_WITH(dir.create_file("sub", 0640, false),
                    "--flag: " + (tmp.path() / "sub").string() + " exists and is not a regular file; remove it");
  CHECK_THROWS_WITH(CheckedDirectory::open((tmp.path() / "none" / "deeper").string(), 0750, "--flag"),
                    "--flag: cannot create directory '" + (tmp.path() / "none" / "deeper").string() +
                        "': No such file or directory");
  CHECK(dir.below("made/below", 0750).create_file("f", 0640, true));
  CHECK_THROWS_WITH(dir.below("made/below", 0750).create_file("f", 0640, true),
                    "--flag: cannot create '" + (tmp.path() / "made/below/f").string() + "': File exists");
}

TEST_CASE("output files (--output-filename): a directory others can write in, links below it, a file not its own: "
          "refused, named",
          "[output]") {
  TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  Outside outside(tmp.path() / "outside");
  {
    INFO("the legitimate case: DIR made 0750 less the umask, a new run empties the files an earlier one left");
    { auto mux = output_to(dir); }
    CHECK((fs::status(dir).permissions() & fs::perms::others_all) == fs::perms::none);
    write_text(dir / "rank.0" / "stdout", "an earlier run's\n");
    {
      auto mux = output_to(dir);
      mux.write(0, OutputStream::kStdout, "new\n");
      REQUIRE(mux.drain(std::chrono::seconds(5)));
    }
    CHECK(read_text(dir / "rank.0" / "stdout") == "new\n");
  }
  {
    INFO("DIR writable by others");
    ::chmod(dir.c_str(), 0777);
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + writable(dir.string(), "0777"));
    ::chmod(dir.c_str(), 0750);
  }
  {
    INFO("DIR/rank.0/stdout a link to a file outside: refused, the file untouched (the link stays for its owner)");
    fs::remove(dir / "rank.0" / "stdout");
    fs::create_symlink(outside.path, dir / "rank.0" / "stdout");
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + (dir / "rank.0" / "stdout").string() +
                                          " is a symbolic link: hvrun writes no file through a link; remove it");
    CHECK(outside.untouched());
  }
  {
    INFO("DIR/rank.0 a link to a directory outside: refused, nothing made there");
    fs::remove_all(dir / "rank.0");
    fs::create_directories(tmp.path() / "elsewhere");
    fs::create_symlink(tmp.path() / "elsewhere", dir / "rank.0");
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + (dir / "rank.0").string() +
                                          " is a symbolic link: hvrun follows no link below the directory it writes "
                                          "in; remove it");
    CHECK(fs::is_empty(tmp.path() / "elsewhere"));
  }
  {
    INFO("a hard link to a file outside in place of DIR/rank.0/stdout");
    fs::remove(dir / "rank.0");
    fs::create_directories(dir / "rank.0");
    fs::create_hard_link(outside.path, dir / "rank.0" / "stdout");
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + (dir / "rank.0" / "stdout").string() +
                                          " has 2 names (hard links): hvrun writes only files of its own; remove it");
    CHECK(outside.untouched());
  }
  const auto user = neighbour();
  if (!user) {
    WARN("skipped: the cases of another user's paths need root (a second Unix user)");
    return;
  }
  {
    INFO("DIR owned by the neighbour");
    fs::remove_all(dir);
    fs::create_directories(dir);
    ::chmod(dir.c_str(), 0700);
    user->give(dir.string());
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + owned_by(dir.string(), *user));
    CHECK(fs::is_empty(dir));
  }
  {
    INFO("DIR a link the neighbour made, to a directory of the user's");
    fs::remove_all(dir);
    fs::create_directories(tmp.path() / "mine");
    fs::create_symlink(tmp.path() / "mine", dir);
    REQUIRE(::lchown(dir.c_str(), user->uid(), user->gid()) == 0);
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + dir.string() + " is a symbolic link owned by " +
                                          user->name() + " (uid " + std::to_string(user->uid()) +
                                          "): hvrun follows only links that are yours or root's; remove it, or name "
                                          "the directory it points to yourself");
    CHECK(fs::is_empty(tmp.path() / "mine"));
    fs::remove(dir);
  }
  {
    INFO("DIR/rank.0/stdout a file of the neighbour's");
    fs::create_directories(dir / "rank.0");
    write_text(dir / "rank.0" / "stdout", "theirs\n");
    user->give((dir / "rank.0" / "stdout").string());
    CHECK_THROWS_WITH(output_to(dir), "--output-filename: " + (dir / "rank.0" / "stdout").string() + " is owned by " +
                                          user->name() + " (uid " + std::to_string(user->uid()) +
                                          "), not by you: hvrun writes only files of its own; remove it");
    CHECK(read_text(dir / "rank.0" / "stdout") == "theirs\n");
  }
}

TEST_CASE("torchrun logs (--log-dir): a base others own or can write in is refused, and a link in the run's "
          "directory is not followed",
          "[output][torchrun]") {
  TempDir tmp;
  const fs::path base = tmp.path() / "logs";
  Outside outside(tmp.path() / "outside");
  RankLogOptions o;
  o.dir = base.string();
  {
    INFO("the legitimate case: the run's directory new, 0700");
    RankLogs logs(o, "job");
    CHECK((fs::status(logs.run_dir()).permissions() & (fs::perms::group_all | fs::perms::others_all)) ==
          fs::perms::none);
    INFO("a link planted in the run's directory, where rank 0's stdout.log goes: refused, its target untouched");
    fs::create_directories(logs.run_dir() + "/attempt_0/a/0");
    fs::create_symlink(outside.path, logs.run_dir() + "/attempt_0/a/0/stdout.log");
    OutputMux mux(1, OutputOptions{"", false, 1, 2, 10}, {}, logs);
    CHECK_THROWS_WITH(mux.place(0, 0, "a", 0), "--log-dir: " + logs.run_dir() +
                                                   "/attempt_0/a/0/stdout.log is a symbolic link: hvrun writes no "
                                                   "file through a link; remove it");
    CHECK(outside.untouched());
    INFO("a link in place of a directory of the layout");
    fs::create_directories(tmp.path() / "elsewhere");
    fs::create_symlink(tmp.path() / "elsewhere", logs.run_dir() + "/attempt_1");
    CHECK_THROWS_WITH(mux.place(0, 0, "a", 1), "--log-dir: " + logs.run_dir() +
                                                   "/attempt_1 is a symbolic link: hvrun follows no link below the "
                                                   "directory it writes in; remove it");
    CHECK(fs::is_empty(tmp.path() / "elsewhere"));
  }
  {
    INFO("a base writable by others (its group, nogroup, is not the user's own)");
    if (::chown(base.c_str(), static_cast<uid_t>(-1), 65534) != 0) {
      WARN("skipped: a group-writable base in a group of others needs root (chgrp nogroup)");
    } else {
      ::chmod(base.c_str(), 0770);
      CHECK_THROWS_WITH(RankLogs(o, "job"), "--log-dir: " + writable(base.string(), "0770"));
      ::chmod(base.c_str(), 0750);
    }
  }
  const auto user = neighbour();
  if (!user) {
    WARN("skipped: the case of another user's --log-dir needs root (a second Unix user)");
    return;
  }
  fs::remove_all(base);
  fs::create_directories(base);
  user->give(base.string());
  CHECK_THROWS_WITH(RankLogs(o, "job"), "--log-dir: " + owned_by(base.string(), *user));
  CHECK(fs::is_empty(base));
}

TEST_CASE("crash handler: a TMPDIR another user owns, or others can write in unsticky, is not used", "[hang]") {
  TempDir tmp;
  const fs::path dir = tmp.path() / "tmpdir";
  fs::create_directories(dir);
  struct Restore {
    std::optional<std::string> saved;
    ~Restore() { saved ? (void)::setenv("TMPDIR", saved->c_str(), 1) : (void)::unsetenv("TMPDIR"); }
  } restore{std::getenv("TMPDIR") != nullptr ? std::optional<std::string>(std::getenv("TMPDIR")) : std::nullopt};
  ::unsetenv("TMPDIR");
  const std::string fallback = hvrun::RankTools::base_directory();
  ::setenv("TMPDIR", dir.c_str(), 1);
  ::chmod(dir.c_str(), 0700);
  CHECK(hvrun::RankTools::tmpdir_refusal().empty());
  CHECK(hvrun::RankTools::base_directory() == dir.string());
  ::chmod(dir.c_str(), 0777);
  CHECK(hvrun::RankTools::tmpdir_refusal() == "TMPDIR=" + writable(dir.string(), "0777"));
  CHECK(hvrun::RankTools::base_directory() == fallback);
  {
    hvrun::RankTools tools;  // made in the fallback, not in TMPDIR
    CHECK(fs::path(tools.library()).parent_path().parent_path() == fallback);
    CHECK(fs::is_empty(dir));
  }
  ::chmod(dir.c_str(), 0700);
  const auto user = neighbour();
  if (!user) {
    WARN("skipped: the case of another user's TMPDIR needs root (a second Unix user)");
    return;
  }
  user->give(dir.string());
  CHECK(hvrun::RankTools::tmpdir_refusal() == "TMPDIR=" + owned_by(dir.string(), *user));
  CHECK(hvrun::RankTools::base_directory() == fallback);
}

TEST_CASE("crash handler: the agent names the TMPDIR it did not use, and the ranks keep theirs", "[integration]") {
  TempDir tmp;
  const fs::path dir = tmp.path() / "open";
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0777);
  const auto r = hvrun::test::run({hvrun::test::hvrun_bin(), "-np", "1", "-H", "localhost:1", "sh", "-c", "echo T=$TMPDIR"},
                                  std::chrono::seconds(60), {"TMPDIR=" + dir.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(": TMPDIR=" + writable(dir.string(), "0777") + "; hvrun's crash handler goes to ") &&
                        Catch::Contains(" instead (the ranks' TMPDIR is unchanged)"));
  CHECK_THAT(r.out, Catch::Contains("<stdout>:T=" + dir.string()));
  CHECK(fs::is_empty(dir));
}

TEST_CASE("sync check: a link, or a file where others could change it, is never the same file", "[sync]") {
  using hvrun::files_to_sync;
  TempDir tmp;
  const fs::path work = tmp.path() / "work", outside = tmp.path() / "outside";
  write_text(outside, "same");
  const std::string sha = hvrun::sha256_file(outside.string());
  write_text(work / "a", "same");
  CHECK(files_to_sync({{(work / "a").string(), "4", sha}}).empty());
  fs::create_symlink(outside, work / "link");
  CHECK(files_to_sync({{(work / "link").string(), "4", sha}}) == std::vector<int>{0});
  ::chmod(work.c_str(), 0777);
  CHECK(files_to_sync({{(work / "a").string(), "4", sha}}) == std::vector<int>{0});
  ::chmod(work.c_str(), 0755);
  const auto user = neighbour();
  if (!user) {
    WARN("skipped: the case of another user's files needs root (a second Unix user)");
    return;
  }
  user->give((work / "a").string());
  CHECK(files_to_sync({{(work / "a").string(), "4", sha}}) == std::vector<int>{0});
  REQUIRE(::chown((work / "a").c_str(), 0, 0) == 0);
  CHECK(files_to_sync({{(work / "a").string(), "4", sha}}).empty());
  user->give(work.string());
  CHECK(files_to_sync({{(work / "a").string(), "4", sha}}) == std::vector<int>{0});
}

TEST_CASE("check report (--report): a link where the page goes is refused, its target untouched, and a file of "
          "the user's is replaced",
          "[check]") {
  TempDir tmp;
  Outside outside(tmp.path() / "outside");
  const fs::path page = tmp.path() / "report.html";
  hvrun::write_report_file(page.string(), "<p>one</p>\n");
  hvrun::write_report_file(page.string(), "<p>2</p>\n");
  CHECK(read_text(page) == "<p>2</p>\n");
  fs::remove(page);
  fs::create_symlink(outside.path, page);
  CHECK_THROWS_WITH(hvrun::write_report_file(page.string(), "<p>x</p>\n"),
                    "--report: " + page.string() + " is a symbolic link: hvrun writes no file through a link; remove it");
  CHECK(outside.untouched());
}

TEST_CASE("checked directory: a group-writable directory passes in the user's private group, not in another",
          "[integration]") {
  if (::geteuid() != 0) {
    WARN("skipped: making a Unix user needs root");
    return;
  }
  const auto user = neighbour();
  // useradd --user-group gave the neighbour a group of its own, as Debian and Ubuntu do for every user.
  CHECK(hvrun::group_is_private(user->gid(), user->uid()));
  CHECK_FALSE(hvrun::group_is_private(user->gid(), 0));  // root is not in it
  CHECK_FALSE(hvrun::group_is_private(0, user->uid()));  // root's group, which the neighbour is not in
  TempDir tmp;
  const std::string dir = (tmp.path() / "shared").string();
  REQUIRE(::mkdir(dir.c_str(), 0775) == 0);
  REQUIRE(::chmod(dir.c_str(), 0775) == 0);
  user->give(dir);
  CHECK(hvrun::directory_refusal(dir, user->uid(), user->gid(), S_IFDIR | 0775, user->uid(), true).empty());
  CHECK(hvrun::directory_refusal(dir, user->uid(), 0, S_IFDIR | 0775, user->uid(), true) == writable(dir, "0775"));
}

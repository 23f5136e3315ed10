// --sync's pieces without hosts: the launcher's manifest and its bounds (launcher/start/sync_manifest.hpp),
// the agent's answer of what it lacks (agent/sync_check.hpp), the copies and the summary's words.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "agent/sync_check.hpp"
#include "common/error.hpp"
#include "common/file_digest.hpp"
#include "launcher/start/sync_manifest.hpp"
#include "tests/sshd_fixture.hpp"

using namespace hvrun;
namespace fs = std::filesystem;

TEST_CASE("sync manifest: every regular file under the directories, hashed, with its mode; links named, not sent",
          "[sync]") {
  testing::TempDir dir;
  const fs::path root = dir.path() / "proj";
  testing::write_text(root / "train.py", "print('x')\n");
  testing::write_text(root / "lib/model.py", std::string(3000, 'm'));
  testing::write_text(root / "run.sh", "#!/bin/sh\n");
  ::chmod((root / "run.sh").c_str(), 0750);
  fs::create_symlink("train.py", root / "latest.py");
  fs::create_directories(root / "empty");

  const SyncManifest m = sync_manifest({root.string(), (root / "lib").string()}, 1 << 20);
  REQUIRE(m.files.size() == 3);  // lib/model.py once, though two directories hold it
  CHECK(m.files[0].path == (root / "lib/model.py").string());
  CHECK(m.files[1].path == (root / "run.sh").string());
  CHECK(m.files[2].path == (root / "train.py").string());
  CHECK(m.files[0].size == "3000");
  CHECK(m.files[2].sha256 == sha256_file((root / "train.py").string()));
  CHECK(m.modes[1] == 0750);
  CHECK(m.total_bytes == 3000 + 11 + 10);
  CHECK(m.skipped == std::vector<std::string>{(root / "latest.py").string()});

  CHECK_THROWS_MATCHES(sync_manifest({root.string()}, 1000), UsageError,
                       Catch::Message("--sync: the directories hold 3021 bytes in 3 files, more than --sync-limit 1000 "
                                      "bytes; sync a smaller directory or raise --sync-limit"));
  CHECK_THROWS_MATCHES(sync_manifest({(dir.path() / "nope").string()}, 1 << 20), UsageError,
                       Catch::Message("--sync " + (dir.path() / "nope").string() +
                                      ": No such file or directory; give a directory that exists here"));
  CHECK_THROWS_MATCHES(sync_manifest({(root / "train.py").string()}, 1 << 20), UsageError,
                       Catch::Message("--sync " + (root / "train.py").string() +
                                      ": not a directory; give the directory that holds it"));
}

TEST_CASE("sync check: the agent names what it lacks, holds otherwise or cannot read; same size is hashed",
          "[sync]") {
  testing::TempDir dir;
  const fs::path a = dir.path() / "a", b = dir.path() / "b", c = dir.path() / "c", d = dir.path() / "d";
  testing::write_text(a, "same");
  testing::write_text(b, "left");   // same size, other contents
  testing::write_text(c, "short");  // another size
  const std::string sha_same = sha256_file(a.string());
  const std::vector<SyncFile> files{{a.string(), "4", sha_same},
                                    {b.string(), "4", sha_same},
                                    {c.string(), "4", sha_same},
                                    {d.string(), "4", sha_same},  // missing
                                    {dir.path().string(), "4", sha_same}};  // a directory, not a file
  CHECK(files_to_sync(files) == std::vector<int>{1, 2, 3, 4});
  CHECK(files_to_sync({files[0]}).empty());

  CHECK_THROWS_MATCHES(files_to_sync({{"rel/x", "1", ""}}), ProtocolError,
                       Catch::Message("launcher: sync path 'rel/x' is not absolute"));
  CHECK_THROWS_MATCHES(files_to_sync({{"/a/../etc/x", "1", ""}}), ProtocolError,
                       Catch::Message("launcher: sync path '/a/../etc/x' has a '..' component"));
  CHECK_THROWS_MATCHES(files_to_sync({{"/a/x", "1e3", ""}}), ProtocolError,
                       Catch::Message("launcher: sync size '1e3' of /a/x is not a number"));

  // The checker answers on its own thread, once.
  SyncChecker checker;
  std::promise<std::vector<int>> answer;
  checker.start(files, [&](std::vector<int> need) { answer.set_value(std::move(need)); });
  auto future = answer.get_future();
  REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(future.get() == std::vector<int>{1, 2, 3, 4});
  CHECK_THROWS_MATCHES(checker.start(files, [](std::vector<int>) {}), ProtocolError,
                       Catch::Message("launcher: a second sync check"));
}

TEST_CASE("sync: copies from the agent's answer, the copy's bound, and the summary's words", "[sync]") {
  SyncManifest m;
  m.files = {{"/p/a.py", "10", "x"}, {"/p/b.bin", "2097152", "y"}, {"/p/c.py", "5", "z"}};
  m.modes = {0644, 0600, 0755};
  m.sizes = {10, 2097152, 5};
  m.total_bytes = 2097167;

  const auto copies = sync_copies(m, {0, 2}, "agent on lab1");
  REQUIRE(copies.size() == 2);
  CHECK(copies[1].local_path == "/p/c.py");
  CHECK(copies[1].remote_path == "/p/c.py");
  CHECK(copies[1].mode == 0755);
  CHECK_THROWS_MATCHES(sync_copies(m, {2, 0}, "agent on lab1"), ProtocolError,
                       Catch::Message("agent on lab1: sync need names file 0 of 3 out of order"));
  CHECK_THROWS_MATCHES(sync_copies(m, {3}, "agent on lab1"), ProtocolError,
                       Catch::Message("agent on lab1: sync need names file 3 of 3 out of order"));

  FingerprintMsg missing;
  missing.script = "/p/c.py";
  missing.script_error = "No such file or directory";
  CHECK(after_sync(missing, m).script_error.empty());
  CHECK(after_sync(missing, m).script_sha256 == "z");
  missing.script = "/q/other.py";
  CHECK(after_sync(missing, m).script_error == "No such file or directory");

  CHECK(sync_timeout(0, std::chrono::seconds(30)) == std::chrono::seconds(30));
  CHECK(sync_timeout(10u << 20, std::chrono::seconds(30)) == std::chrono::seconds(40));
  CHECK(byte_count_text(1) == "1 byte");
  CHECK(byte_count_text(1000) == "1000 bytes");
  CHECK(byte_count_text(1572864) == "1572864 bytes (1.5 MiB)");
  CHECK(byte_count_text(std::uint64_t{3} << 30) == "3221225472 bytes (3.0 GiB)");

  CHECK(sync_summary(m, {{"lab0", 0, 0}, {"lab1", 2, 15}, {"lab2", 0, 0}, {"lab3", 2, 15}}, false) ==
        "--sync: sent 2 files, 15 bytes, to lab[1,3]; lab[0,2] have all 3 files already");
  CHECK(sync_summary(m, {{"lab1", 1, 2097152}}, true) ==
        "--sync: would send 1 file, 2097152 bytes (2.0 MiB), to lab1");
  m.skipped = {"/p/latest", "/p/fifo"};
  CHECK(sync_summary(m, {{"lab0", 0, 0}}, false) ==
        "--sync: lab0 has all 3 files already; not sent: 2 symbolic links or special files (/p/latest, ...)");
}

// The job secret on a real launch (lab): it travels only on the SSH channel (and the local agent's
// socketpair). It is never in any process's argv or environment, in hvrun's output at the most
// verbose log level, or in any file hvrun or its agents write; and those files get safe modes.
// Needs root; without it the case says why it skips.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support/child_process.hpp"
#include "tests/support/file_text.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Every process's argv and environment that holds `needle`, as "PID cmdline|environ".
std::vector<std::string> processes_holding(const std::string& needle) {
  std::vector<std::string> found;
  DIR* d = ::opendir("/proc");
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    if (std::atoi(e->d_name) <= 0) continue;
    for (const char* what : {"cmdline", "environ"})
      if (slurp(fs::path("/proc") / e->d_name / what).find(needle) != std::string::npos)
        found.push_back(std::string(e->d_name) + " " + what);
  }
  ::closedir(d);
  return found;
}

// Every regular file under `root` whose content holds `needle`.
std::vector<std::string> files_holding(const fs::path& root, const std::string& needle) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::exists(root, ec)) return found;
  for (const auto& entry : fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec))
    if (entry.is_regular_file(ec) && slurp(entry.path()).find(needle) != std::string::npos)
      found.push_back(entry.path().string());
  return found;
}

bool others_may(const fs::path& p, fs::perms what) { return (fs::status(p).permissions() & what) != fs::perms::none; }

}  // namespace

TEST_CASE("the job secret stays on the channel: not in argv, environments, output or files", "[lab][security]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(2);
  TempHome home;
  const std::string h1 = lab.host(1);
  const std::string marker = unique_marker();
  // The remote agent's stdin passes through a tee that records what the launcher sends it: the test's
  // only way to learn the secret (hvrun runs no agent but its own, so the spy cannot be an agent). Host
  // 1's sshd runs this shell in place of root's login shell (lab.sh bind), and it runs hvrun's start
  // script as that shell would. The record lies outside every place searched below.
  const fs::path spy_dir = fs::temp_directory_path() / ("hvrun-spy-" + std::to_string(::getpid()));
  fs::remove_all(spy_dir);
  fs::create_directories(spy_dir);
  const fs::path channel = spy_dir / "channel", spy_shell = spy_dir / "shell";
  const passwd* root = ::getpwuid(0);
  REQUIRE(root != nullptr);
  const std::string login_shell = root->pw_shell;
  REQUIRE(fs::canonical(login_shell) != fs::canonical("/bin/dash"));
  {
    std::ofstream w(spy_shell);
    w << "#!/bin/dash\ntee " << channel.string() << " | /bin/dash \"$@\"\n";
  }
  fs::permissions(spy_shell, fs::perms::owner_all);
  REQUIRE(lab.control({"bind", "1", spy_shell.string(), login_shell}) == 0);
  const fs::path out_dir = home.dir / "out";
  const fs::path trigger = home.dir / "done";

  ChildProcess p(hvrun_on(lab, home,
                          {"--hvrun-log-level", "trace", "--output-filename",
                           out_dir.string(), "-H", "localhost," + h1 + ":2", "-x", marker, "sh", "-c",
                           "echo ready; env; while [ ! -e " + trigger.string() + " ]; do sleep 0.1; done"}));
  REQUIRE(p.wait_for_stdout("<stdout>:ready", 3, 60s));

  static const std::regex secret_field(R"re("secret":"([0-9a-f]+)")re");
  std::smatch m;
  const std::string sent = slurp(channel);
  REQUIRE(std::regex_search(sent, m, secret_field));
  const std::string secret = m[1].str();
  CHECK(secret.size() == 64);  // 32 random bytes

  // While the job runs: hvrun, both agents, the ranks, sshd, everything on this machine.
  const auto holders = processes_holding(secret);
  CHECK(holders.empty());
  INFO("processes holding the secret: " << holders.size());

  std::ofstream(trigger) << "done\n";
  auto r = p.wait(30s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("agent on " + h1 + " is up"));  // trace level was on
  CHECK(r.out.find(secret) == std::string::npos);
  CHECK(r.err.find(secret) == std::string::npos);
  // Files: hvrun's HOME (known_hosts, its cache), the output files, the agents' cache, the lab's state.
  CHECK(files_holding(home.dir, secret).empty());
  CHECK(files_holding("/root/.cache/hvrun", secret).empty());
  CHECK(files_holding(fs::path("/tmp") / lab.var("LAB_PREFIX"), secret).empty());

  // Safe modes: no output file or directory readable by others; known_hosts writable by its owner only.
  for (const auto& entry : fs::recursive_directory_iterator(out_dir)) {
    INFO(entry.path());
    CHECK_FALSE(others_may(entry.path(), fs::perms::others_all));
    CHECK_FALSE(others_may(entry.path(), fs::perms::group_write));
  }
  const fs::path known_hosts = home.dir / ".ssh" / "known_hosts";
  REQUIRE(fs::exists(known_hosts));
  CHECK_FALSE(others_may(known_hosts, fs::perms::group_write | fs::perms::others_write));
  CHECK_FALSE(others_may(home.dir / ".ssh", fs::perms::group_write | fs::perms::others_write));
  CHECK(wait_until_gone(marker, 2s).empty());
  fs::remove_all(spy_dir);
}

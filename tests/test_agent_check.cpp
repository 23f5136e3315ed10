// The agent check script (launcher/start/agent_check.hpp): what it holds, what it does when a POSIX shell
// runs it here against files of each kind, how its report is read before the agent's hello, and what
// CommandAgent (--rsh-agent, srun) says when it refuses. The lab cases are in test_agent_verified.cpp.
#include <catch2/catch.hpp>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "common/file_digest.hpp"
#include "common/log.hpp"
#include "hvrun/error.hpp"
#include "launcher/start/agent_check.hpp"
#include "launcher/start/command_agent.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kDigest(64, 'a');

// A folder of its own with an "agent": a shell script that says it ran (its first line starts "HVR1", as
// the real agent's hello does) and whether it still holds descriptor 3.
struct Place {
  fs::path dir = fs::temp_directory_path() / ("hvrun-agent-check-" + std::to_string(::getpid()));
  fs::path agent = dir / "hvrun-agent";
  Place() {
    fs::remove_all(dir);
    fs::create_directories(dir / "home");
    std::ofstream(agent) << "#!/bin/sh\necho HVR1 ran\n";
    fs::permissions(agent, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  }
  ~Place() { fs::remove_all(dir); }
  // The script for this agent's own digest (or `digest`), run by `shell` with HOME in this folder.
  test::ChildResult check(const std::string& shell, const std::string& digest = "") const {
    AgentCheckPlan plan;
    plan.digest = digest.empty() ? sha256_file(agent.string()) : digest;
    plan.paths = {(dir / "absent").string(), agent.string()};
    plan.cache = true;
    return test::run({"/usr/bin/env", "HOME=" + (dir / "home").string(), shell, "-c", agent_check_script(plan)}, 10s);
  }
};

// An --rsh-agent-like start on this host: `/bin/sh` reads the check script of `plan` on its stdin.
CommandAgentOptions command_options(const AgentCheckPlan& plan) {
  CommandAgentOptions o;
  o.host = "h1";
  o.argv = {"/bin/sh"};
  o.label = "--rsh-agent 'test'";
  o.fix = "the fix";
  o.start_timeout = 10s;
  o.stdin_script = agent_check_script(plan);
  o.digest = plan.digest;
  return o;
}

}  // namespace

TEST_CASE("agent check script: each place in order, quoted, the cached copy last, the upload renamed first") {
  AgentCheckPlan plan;
  plan.digest = kDigest;
  plan.paths = {"/opt/it's here/hvrun-agent"};
  plan.search_path = true;
  plan.cache = true;
  plan.cache_after_mismatch = true;
  plan.staged = ".cache/hvrun/agent-" + kDigest + "/hvrun-agent.upload-1f";
  const std::string s = agent_check_script(plan);
  const std::string dir = "\"$HOME\"/.cache/hvrun/agent-" + kDigest;
  CHECK_THAT(s, Catch::StartsWith("hvrun_h=" + kDigest + "\n"));
  const auto staged = s.find("mv -f \"$HOME\"/'.cache/hvrun/agent-" + kDigest + "/hvrun-agent.upload-1f' " + dir +
                             "/hvrun-agent || rm -f ");
  const auto first = s.find("\nhvrun_try '/opt/it'\\''s here/hvrun-agent'\n");
  const auto search = s.find("\nhvrun_try \"$(command -v hvrun-agent)\"\n");
  const auto cache =
      s.find("\n[ -z \"$hvrun_seen\" ] || { hvrun_dir " + dir + " && hvrun_try " + dir + "/hvrun-agent; }\n");
  REQUIRE(staged != std::string::npos);
  REQUIRE(first != std::string::npos);
  REQUIRE(search != std::string::npos);
  REQUIRE(cache != std::string::npos);
  CHECK((staged < first && first < search && search < cache));
  CHECK_THAT(s, Catch::EndsWith("\nhvrun_say none -\nexit 97\n"));
  // Checked and executed through the one open descriptor.
  CHECK_THAT(s, Catch::Contains("stat -L -c '%u %a %d %i %s %y %z' /proc/self/fd/3") && Catch::Contains("sha256sum </proc/self/fd/3") &&
                    Catch::Contains("openssl dgst -sha256 -r </proc/self/fd/3") &&
                    Catch::Contains("exec /proc/self/fd/3"));
  plan.digest = "abc";
  CHECK_THROWS_WITH(agent_check_script(plan), "agent check: 'abc' is not a SHA-256");
}

TEST_CASE("agent check script under dash and bash: runs the agent that passes, reports each one that does not",
          "[integration]") {
  Place place;
  const std::string agent = place.agent.string();
  for (const std::string shell : {"/bin/sh", "/bin/bash"}) {
    INFO(shell);
    auto ok = place.check(shell);
    CHECK(ok.exit_code == 0);
    CHECK(ok.out == "hvrun-agent-check: run - " + agent + "\nHVR1 ran\n");
    auto other = place.check(shell, kDigest);
    CHECK(other.exit_code == kAgentCheckNoneStatus);
    CHECK(other.out == "hvrun-agent-check: sha256 " + sha256_file(agent) + " " + agent + "\nhvrun-agent-check: none -\n");
    fs::permissions(place.agent, fs::perms::group_write, fs::perm_options::add);
    auto writable = place.check(shell);
    CHECK(writable.out == "hvrun-agent-check: mode 775 " + agent + "\nhvrun-agent-check: none -\n");
    fs::permissions(place.agent, fs::perms::group_write, fs::perm_options::remove);
    if (::geteuid() == 0) {
      REQUIRE(::chown(agent.c_str(), 65534, static_cast<gid_t>(-1)) == 0);
      auto owned = place.check(shell);
      CHECK(owned.out == "hvrun-agent-check: owner 65534 " + agent + "\nhvrun-agent-check: none -\n");
      REQUIRE(::chown(agent.c_str(), 0, static_cast<gid_t>(-1)) == 0);
    } else {
      WARN("skipped the owner check: needs root to give the file away");
    }
  }
  INFO("the cached copy, in a folder that is the user's and no one else's");
  const std::string digest = sha256_file(agent);
  const fs::path cache = place.dir / "home" / ".cache" / "hvrun" / ("agent-" + digest);
  fs::create_directories(cache);
  fs::copy_file(place.agent, cache / "hvrun-agent");
  fs::remove(place.agent);
  fs::permissions(cache, fs::perms::all);
  CHECK(place.check("/bin/sh", digest).out == "hvrun-agent-check: dir-mode 777 " + cache.string() +
                                          "\nhvrun-agent-check: none -\n");
  fs::permissions(cache, fs::perms::owner_all);
  {
    INFO("--agent-path that is not there: the cached copy is not tried (only after a mismatch)");
    AgentCheckPlan plan;
    plan.digest = digest;
    plan.paths = {(place.dir / "absent").string()};
    plan.cache = true;
    plan.cache_after_mismatch = true;
    auto r = test::run({"/usr/bin/env", "HOME=" + (place.dir / "home").string(), "/bin/sh", "-c",
                        agent_check_script(plan)},
                       10s);
    CHECK(r.out == "hvrun-agent-check: none -\n");
  }
  CHECK(place.check("/bin/sh", digest).out ==
        "hvrun-agent-check: run - " + (cache / "hvrun-agent").string() + "\nHVR1 ran\n");
}

TEST_CASE("agent check script: a file that passed is not hashed again until it changes", "[integration]") {
  Place place;
  const std::string agent = place.agent.string();
  // A hash tool on PATH that always answers wrong: the script gets past it only through its record.
  const fs::path fake = place.dir / "fakebin";
  fs::create_directories(fake);
  for (const char* tool : {"openssl", "sha256sum"}) {
    std::ofstream(fake / tool) << "#!/bin/sh\necho " << std::string(64, '0') << " -\n";
    fs::permissions(fake / tool, fs::perms::owner_all);
  }
  AgentCheckPlan plan;
  plan.digest = sha256_file(agent);
  plan.paths = {agent};
  const auto check = [&](bool fake_tools) {
    const std::string path = (fake_tools ? fake.string() + ":" : std::string()) + "/usr/bin:/bin";
    return test::run({"/usr/bin/env", "HOME=" + (place.dir / "home").string(), "PATH=" + path, "/bin/sh", "-c",
                      agent_check_script(plan)},
                     10s);
  };
  const std::string ran = "hvrun-agent-check: run - " + agent + "\nHVR1 ran\n";
  const std::string wrong = "hvrun-agent-check: sha256 " + std::string(64, '0') + " " + agent +
                            "\nhvrun-agent-check: none -\n";
  const fs::path records = place.dir / "home" / ".cache" / "hvrun" / "checked";
  CHECK(check(true).out == wrong);  // no record yet: hashed
  CHECK(check(false).out == ran);   // hashed; makes the record folder, 0700
  REQUIRE(fs::is_directory(records));
  CHECK((fs::status(records).permissions() & fs::perms::mask) == fs::perms::owner_all);
  CHECK(check(false).out == ran);  // hashed; leaves its record
  CHECK(check(true).out == ran);   // the record: not hashed
  INFO("a change to the file moves its ctime: hashed again");
  std::ofstream(agent, std::ios::app) << "# changed\n";
  CHECK(check(true).out == wrong);
  plan.digest = sha256_file(agent);
  CHECK(check(false).out == ran);
  CHECK(check(true).out == ran);
  INFO("a record folder others can write in is not read");
  fs::permissions(records, fs::perms::others_write, fs::perm_options::add);
  CHECK(check(true).out == wrong);
  fs::permissions(records, fs::perms::others_write, fs::perm_options::remove);
  CHECK(check(true).out == ran);
  INFO("nor one whose parent others can write in");
  fs::permissions(records.parent_path(), fs::perms::group_write, fs::perm_options::add);
  CHECK(check(true).out == wrong);
}

TEST_CASE("agent check report: its lines, parsed and worded, the hello left unread") {
  auto f = parse_agent_check_line("hvrun-agent-check: sha256 " + kDigest + " /opt/my dir/hvrun-agent");
  REQUIRE(f);
  CHECK(f->what == "sha256");
  CHECK(f->path == "/opt/my dir/hvrun-agent");
  CHECK(finding_text(*f, std::string(64, 'b')) == "/opt/my dir/hvrun-agent has SHA-256 " + kDigest + ", not " +
                                                     std::string(64, 'b') + " (this hvrun's agent)");
  CHECK(finding_text(*parse_agent_check_line("hvrun-agent-check: owner 1001 /x/a"), kDigest) ==
        "/x/a is owned by uid 1001, neither you nor root");
  CHECK(finding_text(*parse_agent_check_line("hvrun-agent-check: mode 777 /x/a"), kDigest) ==
        "/x/a is writable by group or others (mode 777)");
  CHECK(finding_text(*parse_agent_check_line("hvrun-agent-check: dir-owner 0 /h/.cache/x"), kDigest) ==
        "the folder /h/.cache/x is owned by uid 0, not you");
  CHECK_FALSE(parse_agent_check_line("hvrun-agent-check:"));
  CHECK_FALSE(parse_agent_check_line("Last login: yesterday"));

  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  const std::string said = "hvrun-agent-check: mode 775 /a\nhvrun-agent-check: run - /b\nHVR1rest";
  REQUIRE(::write(sv[1], said.data(), said.size()) == static_cast<ssize_t>(said.size()));
  auto report = read_agent_check(sv[0], 5s, "h1");
  CHECK(report.end == AgentCheckReport::End::kHello);
  CHECK(report.findings.size() == 2);
  CHECK(report.ran() == "/b");
  CHECK_FALSE(report.none());
  CHECK(findings_text(report.findings, kDigest) == "/a is writable by group or others (mode 775)");
  char buf[16] = {};
  CHECK(::read(sv[0], buf, sizeof buf) == 8);
  CHECK(std::string(buf) == "HVR1rest");
  CHECK(read_agent_check(sv[0], 50ms, "h1").end == AgentCheckReport::End::kTimeout);
  const std::string garbage = "hello from .bashrc\n";
  REQUIRE(::write(sv[1], garbage.data(), garbage.size()) == static_cast<ssize_t>(garbage.size()));
  CHECK_THROWS_WITH(read_agent_check(sv[0], 5s, "h1"),
                    "h1: the remote shell wrote 'hello from .bashrc' before hvrun-agent started; make the shell's "
                    "start-up files write nothing for a command");
  ::close(sv[1]);
  CHECK(read_agent_check(sv[0], 5s, "h1").end == AgentCheckReport::End::kEnded);
  ::close(sv[0]);
}

TEST_CASE("agent command (--rsh-agent, srun) with the check script on stdin: refused naming the host, path, what "
          "differs and what to do",
          "[integration][command_agent]") {
  Place place;
  AgentCheckPlan plan;
  plan.digest = kDigest;
  plan.paths = {place.agent.string()};
  CommandAgentOptions o = command_options(plan);
  o.missing = "no executable hvrun-agent at " + place.agent.string() + " or on the PATH";
  try {
    CommandAgent::start(o);
    FAIL("an agent of another digest started");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "h1: refusing to run hvrun-agent there: " + place.agent.string() +
                                       " has SHA-256 " + sha256_file(place.agent.string()) + ", not " + kDigest +
                                       " (this hvrun's agent); --rsh-agent 'test' cannot copy hvrun's own agent to "
                                       "the host as hvrun's SSH does: install this hvrun's build there (the same "
                                       "hvrun-agent file), or give --agent-path a path where it is");
  }
  {
    INFO("a command that ends without reading the script: its exit code and what it wrote");
    CommandAgentOptions failing = o;
    failing.argv = {"/bin/sh", "-c", "echo no-such-pod >&2; exit 5"};
    try {
      CommandAgent::start(failing);
      FAIL("a failing command started an agent");
    } catch (const Error& e) {
      CHECK(std::string(e.what()) ==
            "h1: --rsh-agent 'test' exited with code 5 before hvrun-agent said hello (it wrote: no-such-pod); the fix");
    }
  }
  fs::remove(place.agent);
  try {
    CommandAgent::start(o);
    FAIL("an agent that is not there started");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "h1: no executable hvrun-agent at " + place.agent.string() +
                                       " or on the PATH (--rsh-agent 'test'); the fix");
  }
}

TEST_CASE("agent command (--rsh-agent, srun): a later place that passes runs, and one warning names the one that did "
          "not",
          "[integration][command_agent]") {
  Place place;
  const fs::path other = place.dir / "other-agent";
  std::ofstream(other) << "#!/bin/sh\necho HVR1 other\n";
  fs::permissions(other, fs::perms::owner_all);
  const std::string digest = sha256_file(place.agent.string());
  AgentCheckPlan plan;
  plan.digest = digest;
  plan.paths = {other.string(), place.agent.string()};
  CommandAgentOptions o = command_options(plan);
  std::ostringstream log;
  init_log(kHvrunLogPrefix, [&log] { return std::make_shared<spdlog::sinks::ostream_sink_st>(log); });
  std::unique_ptr<CommandAgent> agent;
  try {
    agent = CommandAgent::start(o);
  } catch (...) {
    init_log(kHvrunLogPrefix);
    throw;
  }
  init_log(kHvrunLogPrefix);
  set_log_threshold(LogLevel::info, all_log_subsystems());
  CHECK(log.str() == "hvrun: h1: " + other.string() + " has SHA-256 " + sha256_file(other.string()) + ", not " +
                         digest + " (this hvrun's agent); running " + place.agent.string() +
                         " instead, which passed the same check; install this hvrun's build there or remove it to "
                         "silence this\n");
  UniqueFd channel = agent->take_channel();
  char buf[16] = {};
  CHECK(::read(channel.get(), buf, sizeof buf - 1) == 9);
  CHECK(std::string(buf) == "HVR1 ran\n");
}

// An agent runs only if it is the one hvrun means to run (issue 41): on lab host 1, another Unix user's
// program sits at the path of hvrun's own agent (lab.sh bind: only that host's sshd and its sessions see
// it). Over hvrun's SSH the job runs with hvrun's own verified copy and one warning; through --rsh-agent
// it is refused; the planted program never runs. Needs root; without it each case says why it skips.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/file_digest.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/neighbour_user.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string own_agent() { return (fs::path(hvrun_bin()).parent_path() / "hvrun-agent").string(); }

// A program that, should it ever run, leaves `marker` and what it was sent on stdin.
fs::path plant(const SharedDir& shared, const std::string& name, const fs::path& marker) {
  const fs::path planted = shared.dir / name;
  std::ofstream(planted) << "#!/bin/sh\ncat > " << marker.string() << "\n";
  fs::permissions(planted, fs::perms::all);
  return planted;
}

// An --rsh-agent that joins its words for a remote shell, as ssh does: hvrun's words must read the same.
std::string ssh_rsh(const Lab& lab) {
  return "ssh -p " + lab.var("LAB_PORT") + " -i " + lab.var("LAB_KEY") +
         " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes";
}

std::vector<std::string> hvrun_rsh(const Lab& lab, const TempHome& home, const std::string& rsh,
                                   const std::vector<std::string>& args) {
  std::vector<std::string> cmd{"/usr/bin/env", "HOME=" + home.dir.string(), hvrun_bin(), "--rsh-agent", rsh};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return lab.on_host(0, cmd);
}

}  // namespace

TEST_CASE("agent verified where it runs: hvrun's own at its path, found on the host, checked and used, no warning",
          "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(2);
  TempHome home;
  const std::string h1 = lab.host(1);
  auto r = run(hvrun_on(lab, home, {"--verbose", "-H", h1 + ":2", "sh", "-c", "echo rank=$HVRUN_RANK"}), 60s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_of(r.out, "<stdout>:rank=") == 2);
  CHECK_THAT(r.err, Catch::Contains("agent on " + h1 + " is up") &&
                        Catch::Contains("found on the host (" + own_agent() + ")"));
  CHECK_THAT(r.err, !Catch::Contains("warning") && !Catch::Contains("instead"));

  INFO("the agent keeps no descriptor of its own file, and ps shows its name");
  ChildProcess p(hvrun_on(lab, home, {"--verbose", "-H", h1, "sh", "-c", "echo ready; exec sleep 30"}));
  REQUIRE(p.wait_for_stdout("<stdout>:ready", 1, 60s));
  const auto agents = agent_pids(p.stderr_so_far());
  REQUIRE(agents.count(h1) == 1);
  const std::string fds = "/proc/" + std::to_string(agents.at(h1)) + "/fd";
  for (const auto& e : fs::directory_iterator(fds)) {
    std::error_code ec;
    CHECK(fs::read_symlink(e.path(), ec).string() != own_agent());
  }
  p.signal(SIGTERM);
  p.wait(30s);
}

TEST_CASE("agent at hvrun's path planted by another user: over SSH hvrun's own copy runs with one warning, "
          "--rsh-agent refuses, the planted program never runs",
          "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  SharedDir shared("planted-agent");
  NeighbourUser neighbour(Lab::default_prefix());
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string digest = hvrun::sha256_file(own_agent());
  const fs::path marker = shared.dir / "planted-ran";
  fs::permissions(shared.dir, fs::perms::all);  // the planted program could write its marker as anyone
  const fs::path foreign = plant(shared, "foreign-agent", marker);
  neighbour.give(foreign.string());
  REQUIRE(lab.control({"bind", "1", foreign.string(), own_agent()}) == 0);
  const std::string owner_text = own_agent() + " is owned by uid " + std::to_string(neighbour.uid()) +
                                 ", neither you nor root";
  {
    INFO("over SSH: the job runs with the verified cached copy; one warning names the host, the path, the owner");
    auto r = run(hvrun_on(lab, home, {"--verbose", "-H", h1 + "," + h2, "hostname"}), 90s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:" + h1 + "\n") == 1);
    CHECK(count_of(r.out, "<stdout>:" + h2 + "\n") == 1);
    CHECK(count_of(r.err, owner_text) == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": " + owner_text + "; running ~/.cache/hvrun/agent-" + digest +
                                      "/hvrun-agent instead (this hvrun's own agent, verified)"));
    CHECK_THAT(r.err, Catch::Contains("agent on " + h2 + " is up") &&
                          Catch::Contains("found on the host (" + own_agent() + ")"));
  }
  {
    INFO("through an --rsh-agent (ssh-like): refused, naming the host, the path, the owner and what to do");
    auto r = run(hvrun_rsh(lab, home, ssh_rsh(lab), {"-H", h1, "true"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": refusing to run hvrun-agent there: " + owner_text) &&
                          Catch::Contains("install this hvrun's build there"));
    INFO("the same command to a host without the planted file starts hvrun's agent");
    auto fine = run(hvrun_rsh(lab, home, ssh_rsh(lab), {"-H", h2, "hostname"}), 60s);
    INFO(fine.out << fine.err);
    CHECK(fine.exit_code == 0);
    CHECK(count_of(fine.out, "<stdout>:" + h2 + "\n") == 1);
  }
  {
    INFO("the user's own file, but writable by group and others: refused for its mode");
    const fs::path writable = plant(shared, "writable-agent", marker);
    REQUIRE(lab.control({"bind", "1", writable.string(), own_agent()}) == 0);
    auto r = run(hvrun_on(lab, home, {"-H", h1, "hostname"}), 90s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:" + h1 + "\n") == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": " + own_agent() + " is writable by group or others (mode 777); running "
                                           "~/.cache/hvrun/agent-" + digest + "/hvrun-agent instead"));
  }
  {
    INFO("no agent at hvrun's path, and the cache folder is another user's: refused, naming the folder");
    const fs::path absent = shared.dir / "not-executable";
    std::ofstream(absent) << "not an agent\n";
    fs::permissions(absent, fs::perms::owner_read | fs::perms::owner_write);
    REQUIRE(lab.control({"bind", "1", absent.string(), own_agent()}) == 0);
    // The lab's hosts share root's home; this build's own entry is made anew by the next run that needs it.
    const fs::path entry = fs::path("/root/.cache/hvrun") / ("agent-" + digest);
    fs::remove_all(entry);
    fs::create_directories(entry);
    neighbour.give(entry.string());
    auto r = run(hvrun_on(lab, home, {"-H", h1, "true"}), 60s);
    fs::remove_all(entry);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": the folder " + entry.string() + " is owned by uid " +
                                      std::to_string(neighbour.uid()) +
                                      ", not you, and hvrun keeps its own copy of hvrun-agent there; remove that "
                                      "folder (hvrun makes it anew, mode 0700)"));
  }
  if (fs::exists("/usr/bin/openssl")) {
    INFO("a host whose hash tool lies: even the uploaded copy fails its check, and the host is refused");
    const fs::path liar = shared.dir / "openssl";
    std::ofstream(liar) << "#!/bin/sh\necho " << std::string(64, '0') << " '*stdin'\n";
    fs::permissions(liar, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    REQUIRE(lab.control({"bind", "1", liar.string(), "/usr/bin/openssl"}) == 0);
    const fs::path entry = fs::path("/root/.cache/hvrun") / ("agent-" + digest);
    // Without the records of files that passed (launcher/start/agent_check.cpp), so that every place is
    // hashed by the liar.
    fs::remove_all("/root/.cache/hvrun/checked");
    auto r = run(hvrun_on(lab, home, {"-H", h1, "true"}), 60s);
    fs::remove_all(entry);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": the copy of hvrun-agent uploaded to ~/.cache/hvrun/agent-" + digest +
                                      "/hvrun-agent failed its check: " + (entry / "hvrun-agent").string() +
                                      " has SHA-256 " + std::string(64, '0') + ", not " + digest +
                                      " (this hvrun's agent); check that file system, and that `openssl dgst "
                                      "-sha256` or `sha256sum` works there"));
  } else {
    WARN("skipped the lying hash tool: no /usr/bin/openssl to bind over");
  }
  CHECK_FALSE(fs::exists(marker));
}

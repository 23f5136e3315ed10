// Remote launch on a network-namespace lab (scripts/lab.sh): hvrun runs on lab host 0 and reaches the
// other hosts over SSH on a non-default port. Needs root; without it the cases say why they skip.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("remote launch across three lab hosts", "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);

  // Each remote hostname twice, ranks numbered in -H order.
  auto r = run(hvrun_on(lab, home, {"-np", "6", "-H", "localhost:2," + h1 + ":2," + h2 + ":2", "hostname"}), 60s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_of(r.out, "<stdout>:" + h1 + "\n") == 2);
  CHECK(count_of(r.out, "<stdout>:" + h2 + "\n") == 2);
  CHECK(count_of(r.out, "<stdout>:" + lab.host(0) + "\n") == 2);
  CHECK_THAT(r.out, Catch::Contains("[2]<stdout>:" + h1) && Catch::Contains("[3]<stdout>:" + h1) &&
                        Catch::Contains("[4]<stdout>:" + h2) && Catch::Contains("[5]<stdout>:" + h2));
  // The unknown hosts were recorded in known_hosts under [host]:port.
  std::ifstream kh(home.dir / ".ssh" / "known_hosts");
  std::string known((std::istreambuf_iterator<char>(kh)), std::istreambuf_iterator<char>());
  CHECK_THAT(known, Catch::Contains("[" + h1 + "]:" + lab.var("LAB_PORT")));

  {
    INFO("cwd, -x and the rank contract reach remote ranks; host-specific variables do not");
    auto e = run(hvrun_on(lab, home,
                          {"-H", "localhost," + h1 + "," + h2, "-x", "HVRUN_TEST_VALUE=from-x", "sh", "-c",
                           "echo V=$HVRUN_TEST_VALUE D=$(pwd) R=$HVRUN_RANK H=$HVRUN_HOSTNAME X=${SSH_TEST_X:-unset} "
                           "I=$HVRUN_IFACE M=$MASTER_ADDR"}),
                 60s, {"SSH_TEST_X=leak"});
    INFO(e.out << e.err);
    REQUIRE(e.exit_code == 0);
    const std::string cwd = fs::current_path().string();
    CHECK_THAT(e.out, Catch::Contains("[1]<stdout>:V=from-x D=" + cwd + " R=1 H=" + h1));
    CHECK_THAT(e.out, Catch::Contains("[2]<stdout>:V=from-x D=" + cwd + " R=2 H=" + h2));
    CHECK_THAT(e.out, Catch::Contains(" M=" + lab.list("LAB_FABRIC_ADDRS").at(0)));
    CHECK_THAT(e.out, Catch::Contains("I=" + lab.list("LAB_FABRIC_IFACES").at(1)));
  }
}

TEST_CASE("SSH set-up on the lab: config aliases, missing agents, host keys, unauthorized keys", "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  {
    INFO("~/.ssh/config: a Host alias with HostName, Port and IdentityFile; no -p or -i");
    std::ofstream cfg(home.dir / ".ssh" / "config");
    cfg << "Host node-one\n  HostName " << h1 << "\n  Port " << lab.var("LAB_PORT") << "\n  IdentityFile "
        << lab.var("LAB_KEY") << "\n  User root\n";
    cfg.close();
    auto r = run(lab.on_host(0, {"/usr/bin/env", "HOME=" + home.dir.string(), hvrun_bin(), "-H", "node-one:2",
                                 "hostname"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:" + h1 + "\n") == 2);
  }
  {
    INFO("a host without hvrun-agent gets a copy over SFTP, checked by hash, and runs it");
    const fs::path dir = fs::temp_directory_path() / ("hvrun-copy-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(hvrun_bin(), dir / "hvrun");
    fs::copy_file(fs::path(hvrun_bin()).parent_path() / "hvrun-agent", dir / "hvrun-agent");
    // Not executable at the shared path, so no host can use it in place; not on PATH either.
    fs::permissions(dir / "hvrun-agent", fs::perms::owner_read | fs::perms::owner_write);
    // The lab's hosts share root's home: the cache entry for this binary is removed before and after.
    auto digest = run({"/usr/bin/sha256sum", (dir / "hvrun-agent").string()}, 30s).out.substr(0, 64);
    const fs::path entry = fs::path("/root/.cache/hvrun") / ("agent-" + digest);
    // Both hosts look at once in one shared home (as on NFS): at least one copies, the other may find
    // that copy already in place or copy too, and neither may ever find the file missing or half
    // written. Repeated, because the race this guards against is a matter of timing.
    for (int round = 0; round < 4; ++round) {
      INFO("round " << round);
      fs::remove_all(entry);
      auto r = run(hvrun_on(lab, home, {"--verbose", "-H", h1 + "," + h2, "hostname"}, 0, (dir / "hvrun").string()),
                   90s);
      INFO(r.out << r.err);
      CHECK(r.exit_code == 0);
      CHECK_THAT(r.err, Catch::Contains("copied to ~/.cache/hvrun/agent-" + digest));
      CHECK(count_of(r.out, "<stdout>:" + h1 + "\n") == 1);
      CHECK(count_of(r.out, "<stdout>:" + h2 + "\n") == 1);
      // No staged upload is left beside the copy.
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(entry)) names.push_back(e.path().filename().string());
      CHECK(names == std::vector<std::string>{"hvrun-agent"});
    }
    CHECK(fs::exists(entry / "hvrun-agent"));
    CHECK((fs::status(entry / "hvrun-agent").permissions() & fs::perms::all) == fs::perms::owner_all);
    // Second run: the cached copy passes its hash check and is used as it is.
    auto again = run(hvrun_on(lab, home, {"--verbose", "-H", h1, "hostname"}, 0, (dir / "hvrun").string()), 60s);
    CHECK(again.exit_code == 0);
    CHECK_THAT(again.err, Catch::Contains("cached copy ~/.cache/hvrun/agent-" + digest));
    // A cached copy that was tampered with fails its hash check and is replaced.
    {
      std::ofstream tamper(entry / "hvrun-agent", std::ios::app);
      tamper << "x";
    }
    auto replaced = run(hvrun_on(lab, home, {"--verbose", "-H", h1, "hostname"}, 0, (dir / "hvrun").string()), 60s);
    CHECK(replaced.exit_code == 0);
    CHECK_THAT(replaced.err, Catch::Contains("copied to ~/.cache/hvrun/agent-" + digest));
    fs::remove_all(entry);
    fs::remove_all(dir);
  }
  {
    INFO("--agent-path naming another build: its SHA-256 differs, so hvrun's own copy runs, with one warning");
    const std::string fake = (fs::path(hvrun_bin()).parent_path().parent_path() / "tests" / "hvrun_fake_agent").string();
    auto r = run(hvrun_on(lab, home, {"--agent-path", fake, "-H", h1, "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:" + h1 + "\n") == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": " + fake + " has SHA-256 ") &&
                          Catch::Contains("(this hvrun's agent); running ~/.cache/hvrun/agent-"));
  }
  {
    INFO("an agent of another version (beside hvrun, the local agent) is refused with both versions named");
    const std::string fake = (fs::path(hvrun_bin()).parent_path().parent_path() / "tests" / "hvrun_fake_agent").string();
    const fs::path dir = fs::temp_directory_path() / ("hvrun-fake-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(hvrun_bin(), dir / "hvrun");
    fs::copy_file(fake, dir / "hvrun-agent");
    auto r = run(hvrun_on(lab, home, {"-H", "localhost", "true"}, 0, (dir / "hvrun").string()), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("version 0.0.0-fake") && Catch::Contains("hvrun is 0.1.0"));
    fs::remove_all(dir);
  }
  {
    INFO("a changed host key is refused, naming the host and what to remove");
    auto first = run(hvrun_on(lab, home, {"-H", h2, "true"}), 60s);
    REQUIRE(first.exit_code == 0);
    REQUIRE(lab.control({"rekey", "2"}) == 0);
    auto r = run(hvrun_on(lab, home, {"-H", h1 + "," + h2, "true"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h2 + ": host key changed"));
    CHECK_THAT(r.err, Catch::Contains("ssh-keygen -R"));
  }
  {
    INFO("a key that is not authorized fails fast with the fix");
    const fs::path key = home.dir / "stranger";
    REQUIRE(run({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key.string()}, 30s).exit_code == 0);
    auto r = run(lab.on_host(0, {"/usr/bin/env", "HOME=" + home.dir.string(), hvrun_bin(), "-p", lab.var("LAB_PORT"),
                                 "-i", key.string(), "-H", h1, "true"}),
                 30s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(h1 + ": permission denied (publickey)"));
    CHECK_THAT(r.err, Catch::Contains("ssh-copy-id -p " + lab.var("LAB_PORT")));
    CHECK(r.elapsed < 10s);
  }
  {
    INFO("every host that fails is reported, not just the first");
    REQUIRE(lab.control({"ssh-stop", "1"}) == 0);
    auto r = run(hvrun_on(lab, home, {"--ssh-connect-timeout", "3", "-H", h1 + ",no-such-host.invalid," + h2, "true"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    // h2's key was changed above, so all three fail, each for its own reason.
    CHECK_THAT(r.err, Catch::Contains("cannot start the job on 3 of 3 hosts"));
    CHECK_THAT(r.err, Catch::Contains(h2 + ": host key changed"));
    CHECK_THAT(r.err, Catch::Contains(h1 + ": connection refused"));
    CHECK_THAT(r.err, Catch::Contains("no-such-host.invalid"));
    lab.control({"ssh-start", "1"});
  }
}

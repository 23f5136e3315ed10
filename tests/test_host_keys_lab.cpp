// The ssh config's host-key policy on a network-namespace lab (issue 41): StrictHostKeyChecking yes
// refuses a host whose key is in none of the files its UserKnownHostsFile names, before anything runs
// there; accept-new records the key in that file; a changed key (lab.sh rekey) is refused; a ProxyJump
// hop gets its own policy. One lab, several runs. Needs root; without it the case says why it skips.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("ssh config host-key policy on lab hosts: yes then accept-new then a changed key then a ProxyJump hop", "[lab][host_keys]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2), port = lab.var("LAB_PORT");
  const fs::path kh = home.dir / "kh";
  std::ofstream(home.dir / ".ssh" / "config")
      << "Host strict_node1\n  HostName " << h1 << "\n  StrictHostKeyChecking yes\n  UserKnownHostsFile " << kh.string()
      << "/strict\n"
      << "Host new_node2\n  HostName " << h2 << "\n  StrictHostKeyChecking accept-new\n  UserKnownHostsFile "
      << kh.string() << "/new\n"
      << "Host hop_node1\n  HostName " << h1 << "\n  StrictHostKeyChecking yes\n  UserKnownHostsFile " << kh.string()
      << "/hop\n"
      << "Host jumped_node2\n  HostName " << h2 << "\n  ProxyJump hop_node1\n"
      << "Host *\n  Port " << port << "\n  IdentityFile " << lab.var("LAB_KEY") << "\n  User root\n"
      << "  GlobalKnownHostsFile none\n";
  const fs::path log1 = fs::path(lab.var("LAB_DIR")) / "h1" / "sshd.log";
  {
    INFO("StrictHostKeyChecking yes, the key in no file: refused and named; no login on the host");
    const auto logins = count_of(text_of(log1), "Accepted publickey");
    auto r = run(hvrun_on(lab, home, {"-H", "strict_node1", "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("strict_node1: host key unknown ([" + h1 + "]:" + port +
                                      " is not in the known-hosts files consulted: " + kh.string() +
                                      "/strict; policy: StrictHostKeyChecking yes in the ssh config), and unknown "
                                      "hosts are refused; check the key (ssh-ed25519 SHA256:") &&
                          Catch::Contains("ssh-keyscan -p " + port + " " + h1 + " >> " + kh.string() + "/strict"));
    CHECK(r.out.empty());
    CHECK(count_of(text_of(log1), "Accepted publickey") == logins);
    CHECK_FALSE(fs::exists(kh / "strict"));
  }
  {
    INFO("accept-new: the key is recorded in the config's file, and the job runs");
    auto r = run(hvrun_on(lab, home, {"-H", "new_node2", "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "[0]<stdout>:" + h2 + "\n") == 1);
    CHECK(count_of(text_of(kh / "new"), "[" + h2 + "]:" + port + " ssh-ed25519 ") == 1);
    CHECK_FALSE(fs::exists(home.dir / ".ssh" / "known_hosts"));
  }
  {
    INFO("a changed key (lab.sh rekey): refused, naming the file that holds the old one");
    REQUIRE(lab.control({"rekey", "2"}) == 0);
    auto r = run(hvrun_on(lab, home, {"-H", "new_node2", "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("new_node2: host key changed (possible man-in-the-middle): [" + h2 + "]:" + port +
                                      " now shows ssh-ed25519 SHA256:") &&
                          Catch::Contains(", and " + kh.string() + "/new holds another key for it") &&
                          Catch::Contains("ssh-keygen -R '[" + h2 + "]:" + port + "' -f " + kh.string() + "/new"));
    CHECK(r.out.empty());
  }
  {
    INFO("a ProxyJump hop with StrictHostKeyChecking yes and its key unknown: refused, the hop named");
    auto r = run(hvrun_on(lab, home, {"-H", "jumped_node2", "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("jumped_node2: a ProxyJump hop (hop_node1) refused its host key") &&
                          Catch::Contains("No ED25519 host key is known for [" + h1 + "]:" + port));
    CHECK(r.out.empty());
  }
  {
    INFO("the hop's key in its file: the job runs through it, the target recorded by hvrun's default");
    std::ofstream(kh / "hop") << text_of(lab.var("LAB_KNOWN_HOSTS"));
    auto r = run(hvrun_on(lab, home, {"-H", "jumped_node2", "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "[0]<stdout>:" + h2 + "\n") == 1);
    CHECK(count_of(text_of(home.dir / ".ssh" / "known_hosts"), "[" + h2 + "]:" + port + " ssh-ed25519 ") == 1);
  }
}

// Host names as OpenSSH takes them, on a network-namespace lab: ranks launched on
// hosts reached through ~/.ssh/config aliases with '_', in upper case, from an Included file, through a
// `Match host` block, and through a ProxyJump to a host whose sshd refuses hvrun's host; --check-only
// names them as written. One lab, three runs. Needs root; without it the case says why it skips.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("ssh config aliases as OpenSSH takes them, across lab hosts", "[lab][ssh_alias]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(4);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2), h3 = lab.host(3);
  // What every alias needs to be reached; the ProxyJump's own ssh reads it too (hvrun's -p and -i are
  // for hvrun's connections only).
  const std::string reach = "  Port " + lab.var("LAB_PORT") + "\n  IdentityFile " + lab.var("LAB_KEY") +
                            "\n  User root\n";
  const fs::path included = home.dir / ".ssh" / "lab_hosts.conf";  // OpenSSH resolves ~ and relative
  std::ofstream(included) << "Host node.with_underscore\n  HostName " << h3 << "\n";  // Includes by passwd home
  std::ofstream(home.dir / ".ssh" / "config")
      << "Include " << included.string() << "\n"
      << "Host gpu_node1\n  HostName " << h1 << "\n"
      << "Host GPU-Node2\n  HostName " << h2 << "\n"
      << "Match host mh_*\n  HostName " << h2 << "\n"
      << "Host jumped_node3\n  HostName " << h3 << "\n  ProxyJump gpu_node1\n"
      << "Host *\n" << reach;

  {
    INFO("aliases with '_', in upper case, and from an Included file");
    auto r = run(hvrun_on(lab, home, {"-H", "gpu_node1,GPU-Node2:2,node.with_underscore", "hostname"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "[0]<stdout>:" + h1 + "\n") == 1);
    CHECK(count_of(r.out, "<stdout>:" + h2 + "\n") == 2);
    CHECK(count_of(r.out, "[3]<stdout>:" + h3 + "\n") == 1);
  }
  {
    INFO("--check-only names the hosts as written");
    auto r = run(hvrun_on(lab, home, {"--check-only", "-H", "gpu_node1,GPU-Node2"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto ifaces = lab.list("LAB_FABRIC_IFACES");
    CHECK_THAT(r.out, Catch::Contains("NCCL_SOCKET_IFNAME==" + ifaces.at(1) + " on gpu_node1; ") &&
                          Catch::Contains("NCCL_SOCKET_IFNAME==" + ifaces.at(2) + " on GPU-Node2"));
  }
  {
    INFO("a Match host block, and a ProxyJump to a host that drops hvrun's host's SSH connections");
    const std::string port = lab.var("LAB_PORT");
    const std::string from4 = lab.list("LAB_FABRIC_ADDRS").at(0), from6 = "fd77::10";
    REQUIRE(run(lab.on_host(3, {"iptables", "-I", "INPUT", "-p", "tcp", "--dport", port, "-s", from4, "-j", "DROP"}),
                10s)
                .exit_code == 0);
    REQUIRE(run(lab.on_host(3, {"ip6tables", "-I", "INPUT", "-p", "tcp", "--dport", port, "-s", from6, "-j", "DROP"}),
                10s)
                .exit_code == 0);
    const fs::path log3 = fs::path(lab.var("LAB_DIR")) / "h3" / "sshd.log";
    const auto seen = static_cast<std::streamoff>(fs::file_size(log3));  // the first launch's lines
    auto r = run(hvrun_on(lab, home, {"--ssh-connect-timeout", "20", "-H", "mh_two,jumped_node3", "hostname"}), 90s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "[0]<stdout>:" + h2 + "\n") == 1);
    CHECK(count_of(r.out, "[1]<stdout>:" + h3 + "\n") == 1);
    CHECK(r.err.empty());  // nothing from the jump's ssh either
    // h3's sshd saw hvrun's session come from the jump host (h1), never from hvrun's host (h0).
    std::ifstream in(log3);
    in.seekg(seen);
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(count_of(log, "Connection from " + lab.list("LAB_FABRIC_ADDRS").at(1) + " ") >= 1);
    CHECK(count_of(log, "Connection from " + from4 + " ") == 0);
  }
}

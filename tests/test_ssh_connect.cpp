// How SshSession connects, against a throw-away sshd on 127.0.0.1 (tests/sshd_fixture.hpp): ~/.ssh/config
// aliases, host names, host keys, authentication, and each network failure classified with its host and
// port. Root only; without root or /usr/sbin/sshd each case warns and is skipped. [resolver] cases resolve a
// name through getaddrinfo_a, whose glibc-internal threads ThreadSanitizer cannot follow: run TSan builds
// with "[ssh]~[resolver]".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.hpp"
#include "launcher/ssh/ssh_session.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/ssh_test.hpp"

using namespace std::chrono_literals;
using namespace hvrun;
using namespace hvrun::testing;

namespace {

using Clock = std::chrono::steady_clock;

// A TCP listener on 127.0.0.1 that never accepts: with `backlog` 0 and its queue filled it drops SYNs,
// otherwise it completes the TCP handshake and then says nothing.
struct SilentListener {
  explicit SilentListener(int backlog) : fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd.get() >= 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd.get(), sockaddr_ptr(), sizeof addr) == 0);
    REQUIRE(::listen(fd.get(), backlog) == 0);
    REQUIRE(::getsockname(fd.get(), sockaddr_ptr(), &len) == 0);
  }
  sockaddr* sockaddr_ptr() { return reinterpret_cast<sockaddr*>(&addr); }
  int port() const { return ntohs(addr.sin_port); }

  hvrun::UniqueFd fd;
  sockaddr_in addr{};
};

// Dials `port` with a 0.5 s connect timeout and checks that it fails as a timeout, within 3 s, with a
// message that starts with `what` and names the port and the timeout.
void check_timeout(const SshdFixture& sshd, int port, const std::string& what) {
  SshTarget target = sshd.target();
  target.port = port;
  target.connect_timeout = 500ms;
  auto start = Clock::now();
  SshError e = connect_error(target);
  INFO(e.what());
  CHECK(Clock::now() - start < 3s);
  CHECK(e.failure() == SshFailure::kConnectTimeout);
  CHECK(contains(e.what(), what + std::to_string(port) + " within 0.5 s"));
}

}  // namespace

TEST_CASE("ssh: ~/.ssh/config alias with HostName, Port, User and IdentityFile", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  std::filesystem::create_directories(sshd.ssh_dir());
  hvrun::testing::write_text(sshd.ssh_dir() / "config",
                             "Host other\n  HostName 192.0.2.1\n\n"
                             "Host trainer-*\n"
                             "  HostName 127.0.0.1\n"
                             "  Port " + std::to_string(sshd.port()) + "\n"
                             "  User root\n"
                             "  IdentityFile " + sshd.client_key().string() + "\n");
  SshTarget target;
  target.host = "trainer-7";
  target.connect_timeout = 5s;
  SshSession session = SshSession::connect(target);
  CHECK(session.host() == "trainer-7");
  CHECK(session.hostname() == "127.0.0.1");
  CHECK(session.port() == sshd.port());
  CHECK(session.user() == "root");
  CHECK(session.run("echo ok", 10s).out == "ok\n");

  // -p overrides the config's Port (here with a port where nothing listens).
  int closed_port = hvrun::testing::free_port();
  target.port = closed_port;
  SshError e = connect_error(target);
  CHECK(e.failure() == SshFailure::kConnectionRefused);
  CHECK(e.port() == closed_port);
  CHECK(contains(e.what(), "trainer-7: "));
  CHECK(contains(e.what(), "port " + std::to_string(closed_port)));
}

TEST_CASE("ssh: hosts as OpenSSH takes them: '_' and upper case in aliases, ProxyJump", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  std::filesystem::create_directories(sshd.ssh_dir());
  const std::string reach = "  HostName 127.0.0.1\n  Port " + std::to_string(sshd.port()) + "\n  User root\n" +
                            "  IdentityFile " + sshd.client_key().string() + "\n";
  hvrun::testing::write_text(sshd.ssh_dir() / "config", "Host gpu_node1\n" + reach + "Host GPU-Node2\n" + reach +
                                                            "Host jumped_node\n" + reach + "  ProxyJump gpu_node1\n" +
                                                            "Host keyed_node\n" + reach +
                                                            "  HostKeyAlias trainers-key\n");
  SshTarget target;
  target.connect_timeout = 5s;
  for (const char* alias : {"gpu_node1", "GPU-Node2"}) {
    INFO(alias);
    target.host = alias;
    SshSession session = SshSession::connect(target);
    CHECK(session.host() == alias);
    CHECK(session.hostname() == "127.0.0.1");
    CHECK(session.run("echo ok", 10s).out == "ok\n");
  }
  // OpenSSH's Host patterns are case-sensitive: the lower-case name matches no alias and is dialled.
  target.host = "gpu-node2";
  target.connect_timeout = 2s;
  SshError unmatched = connect_error(target);
  CHECK(unmatched.failure() == SshFailure::kNameResolution);
  CHECK(contains(unmatched.what(), "gpu-node2: cannot resolve host name 'gpu-node2'"));

  // ProxyJump: the jump host's sshd sees two logins, the second a direct-tcpip channel's.
  const auto logins = [&] {
    const std::string log = hvrun::testing::read_text(sshd.log());
    const std::string accepted = "Accepted publickey";
    int n = 0;
    for (auto at = log.find(accepted); at != std::string::npos; at = log.find(accepted, at + 1)) ++n;
    return n;
  };
  const int before = logins();
  target.host = "jumped_node";
  target.connect_timeout = 10s;
  SshSession jumped = SshSession::connect(target);
  CHECK(jumped.run("echo via-jump", 10s).out == "via-jump\n");
  CHECK(logins() == before + 2);

  // HostKeyAlias: known_hosts records and checks the key under that name alone, as OpenSSH does.
  target.host = "keyed_node";
  SshSession::connect(target);
  CHECK(contains(hvrun::testing::read_text(sshd.known_hosts()), "\ntrainers-key ssh-ed25519 "));
  target.strict_host_key = true;
  CHECK(SshSession::connect(target).run("echo keyed", 10s).out == "keyed\n");
}

TEST_CASE("ssh: a host name is resolved and each of its addresses tried", "[ssh][integration][resolver]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;  // listens on 127.0.0.1 only: "localhost" may resolve to ::1 first, which refuses
  SshTarget target = sshd.target();
  target.host = "localhost";
  SshSession session = SshSession::connect(target);
  CHECK(session.run("echo ok", 10s).out == "ok\n");
  CHECK(contains(hvrun::testing::read_text(sshd.known_hosts()), "[localhost]:" + std::to_string(sshd.port()) + " "));
}

TEST_CASE("ssh: a new host key is recorded in known_hosts as [host]:port", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  REQUIRE_FALSE(std::filesystem::exists(sshd.known_hosts()));
  SshSession::connect(sshd.target());
  std::string known = hvrun::testing::read_text(sshd.known_hosts());
  CHECK(contains(known, "[127.0.0.1]:" + std::to_string(sshd.port()) + " ssh-ed25519 "));
  // Known now: strict checking accepts it, and nothing is added.
  SshTarget strict = sshd.target();
  strict.strict_host_key = true;
  SshSession::connect(strict);
  CHECK(hvrun::testing::read_text(sshd.known_hosts()) == known);
}

TEST_CASE("ssh: a changed host key is refused with the command that removes the old one", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshSession::connect(sshd.target());
  sshd.restart_with_new_host_key();
  SshError e = connect_error(sshd.target());
  CHECK(e.failure() == SshFailure::kHostKeyChanged);
  CHECK(e.host() == "127.0.0.1");
  CHECK(e.port() == sshd.port());
  const std::string entry = "[127.0.0.1]:" + std::to_string(sshd.port());
  CHECK_THAT(e.what(), Catch::StartsWith("127.0.0.1: host key changed (possible man-in-the-middle): " + entry +
                                         " now shows ssh-ed25519 SHA256:") &&
                           Catch::Contains(", and " + sshd.known_hosts().string() + " holds another key for it "
                                           "(known-hosts files consulted: " + sshd.known_hosts().string() + ", ") &&
                           Catch::Contains("policy: hvrun's default (StrictHostKeyChecking accept-new)); if the change "
                                           "is expected, remove the old key with: ssh-keygen -R '" + entry + "' -f " +
                                           sshd.known_hosts().string()));
}

TEST_CASE("ssh: strict host key checking refuses an unknown host", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshTarget target = sshd.target();
  target.strict_host_key = true;
  SshError e = connect_error(target);
  CHECK(e.failure() == SshFailure::kHostKeyUnknown);
  CHECK(contains(e.what(), "127.0.0.1: host key unknown"));
  CHECK(contains(e.what(), "ssh-keyscan -p " + std::to_string(sshd.port()) + " 127.0.0.1 >> "));
  CHECK_FALSE(std::filesystem::exists(sshd.known_hosts()));
}

TEST_CASE("ssh: a key the host does not accept fails fast with the fix", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  auto stranger = sshd.dir() / "keys" / "stranger";
  hvrun::testing::make_key(stranger);
  SshTarget target = sshd.target();
  target.identity_file = stranger.string();
  auto start = Clock::now();
  SshError e = connect_error(target);
  auto took = Clock::now() - start;
  CHECK(e.failure() == SshFailure::kAuthDenied);
  CHECK(std::string(e.what()) == "127.0.0.1: permission denied (publickey); copy your key there (ssh-copy-id -p " +
                                     std::to_string(sshd.port()) + " 127.0.0.1) or pass -i");
  CHECK(took < 3s);
}

TEST_CASE("ssh: a missing -i file is named", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshTarget target = sshd.target();
  target.identity_file = (sshd.dir() / "keys" / "no-such-key").string();
  SshError e = connect_error(target);
  CHECK(e.failure() == SshFailure::kIdentityFile);
  CHECK(contains(e.what(), target.identity_file));
}

TEST_CASE("ssh: network failures are classified and name host and port", "[ssh][integration][resolver]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;  // for HOME only

  SECTION("refused: nothing listens") {
    SshTarget target = sshd.target();
    target.port = hvrun::testing::free_port();
    SshError e = connect_error(target);
    CHECK(e.failure() == SshFailure::kConnectionRefused);
    CHECK(contains(e.what(), "127.0.0.1: connection refused by 127.0.0.1 port " + std::to_string(*target.port)));
  }

  SECTION("name resolution") {
    SshTarget target = sshd.target();
    target.host = "no-such-host.invalid";
    target.port = 2222;
    SshError e = connect_error(target);
    CHECK(e.failure() == SshFailure::kNameResolution);
    CHECK(e.host() == "no-such-host.invalid");
    CHECK(contains(e.what(), "no-such-host.invalid: cannot resolve host name 'no-such-host.invalid' (port 2222)"));
  }

  SECTION("timeout: SYNs dropped (a listener whose accept queue is full)") {
    SilentListener listener(0);
    // Fill the queue (never accepted); Linux then drops further SYNs instead of refusing them.
    std::vector<hvrun::UniqueFd> fillers;
    for (int i = 0; i < 2; ++i) {
      fillers.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      (void)::connect(fillers.back().get(), listener.sockaddr_ptr(), sizeof listener.addr);
    }
    std::this_thread::sleep_for(50ms);
    check_timeout(sshd, listener.port(), "127.0.0.1: no answer from 127.0.0.1 port ");
  }

  SECTION("an IPv6 literal is usable as a host (libssh needs it bracketed)") {
    SshTarget target = sshd.target();
    target.host = "::1";
    target.port = hvrun::testing::free_port();
    SshError e = connect_error(target);
    INFO(e.what());
    // Refused where ::1 exists, unreachable (EADDRNOTAVAIL) where IPv6 is off; never a config error.
    CHECK((e.failure() == SshFailure::kConnectionRefused || e.failure() == SshFailure::kUnreachable));
    CHECK(contains(e.what(), "::1: "));
    CHECK(contains(e.what(), "[::1] port " + std::to_string(*target.port)));
  }

  SECTION("timeout: the port accepts TCP but never speaks SSH") {
    SilentListener listener(8);
    check_timeout(sshd, listener.port(), "127.0.0.1: no SSH answer from 127.0.0.1 port ");
  }
}

// The ssh config's StrictHostKeyChecking and UserKnownHostsFile (issue 41): for the host, and for the hop
// of a ProxyJump, whose ssh is given the same policy.
TEST_CASE("ssh: StrictHostKeyChecking and UserKnownHostsFile from the ssh config", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  std::filesystem::create_directories(sshd.ssh_dir());
  const std::filesystem::path files = sshd.home() / "kh";
  const std::string reach = "  HostName 127.0.0.1\n  Port " + std::to_string(sshd.port()) + "\n  User root\n" +
                            "  IdentityFile " + sshd.client_key().string() + "\n  GlobalKnownHostsFile none\n";
  const std::string entry = "[127.0.0.1]:" + std::to_string(sshd.port());
  hvrun::testing::write_text(
      sshd.ssh_dir() / "config",
      "Host strict\n" + reach + "  StrictHostKeyChecking yes\n  UserKnownHostsFile " + files.string() + "/a " +
          files.string() + "/b\n"
          "Host asking\n" + reach + "  StrictHostKeyChecking ask\n  UserKnownHostsFile " + files.string() + "/a\n"
          "Host newcomer\n" + reach + "  StrictHostKeyChecking accept-new\n  UserKnownHostsFile " + files.string() +
          "/a " + files.string() + "/b\n"
          "Host careless\n" + reach + "  StrictHostKeyChecking no\n  UserKnownHostsFile " + files.string() + "/a\n"
          "Host jumper\n" + reach + "  StrictHostKeyChecking yes\n  UserKnownHostsFile " + files.string() + "/hop\n"
          "Host jumped\n" + reach + "  ProxyJump jumper\n  UserKnownHostsFile " + files.string() + "/a\n");
  SshTarget target;
  target.connect_timeout = 10s;

  INFO("yes: an unknown host is refused, named with its key and the files consulted, and nothing is written");
  target.host = "strict";
  SshError e = connect_error(target);
  CHECK(e.failure() == SshFailure::kHostKeyUnknown);
  CHECK_THAT(e.what(), Catch::StartsWith("strict: host key unknown (" + entry + " is not in the known-hosts files "
                                         "consulted: " + files.string() + "/a and " + files.string() + "/b; policy: "
                                         "StrictHostKeyChecking yes in the ssh config), and unknown hosts are "
                                         "refused; check the key (ssh-ed25519 SHA256:") &&
                           Catch::EndsWith(") and add it: ssh to the host once, or ssh-keyscan -p " +
                                           std::to_string(sshd.port()) + " 127.0.0.1 >> " + files.string() +
                                           "/a, or change StrictHostKeyChecking in the ssh config"));
  CHECK_FALSE(std::filesystem::exists(files));
  target.host = "asking";
  CHECK_THAT(connect_error(target).what(), Catch::Contains("policy: StrictHostKeyChecking ask in the ssh config "
                                                           "(taken as yes: hvrun cannot ask)"));

  INFO("accept-new: recorded in the first file; then known, also where the key is in the second file only");
  target.host = "newcomer";
  SshSession::connect(target);
  CHECK(contains(hvrun::testing::read_text(files / "a"), entry + " ssh-ed25519 "));
  CHECK_FALSE(std::filesystem::exists(files / "b"));
  std::filesystem::rename(files / "a", files / "b");
  target.host = "strict";
  CHECK(SshSession::connect(target).run("echo known", 10s).out == "known\n");
  std::filesystem::rename(files / "b", files / "a");

  INFO("a changed key: refused under yes and accept-new, naming the file that holds the old one; accepted under no");
  sshd.restart_with_new_host_key();
  for (const char* host : {"strict", "newcomer"}) {
    target.host = host;
    SshError changed = connect_error(target);
    CHECK(changed.failure() == SshFailure::kHostKeyChanged);
    CHECK_THAT(changed.what(), Catch::StartsWith(std::string(host) + ": host key changed (possible man-in-the-middle): ") &&
                                   Catch::Contains(", and " + files.string() + "/a holds another key for it") &&
                                   Catch::EndsWith("ssh-keygen -R '" + entry + "' -f " + files.string() + "/a"));
  }
  target.host = "careless";
  CHECK(SshSession::connect(target).run("echo careless", 10s).out == "careless\n");

  INFO("--ssh-strict-host-key-checking wins over StrictHostKeyChecking no");
  std::filesystem::remove(files / "a");
  target.strict_host_key = true;
  CHECK(connect_error(target).failure() == SshFailure::kHostKeyUnknown);
  target.strict_host_key = false;

  INFO("a ProxyJump hop with StrictHostKeyChecking yes and its key unknown: refused, the hop's ssh quoted");
  target.host = "jumped";
  SshError hop = connect_error(target);
  CHECK(hop.failure() == SshFailure::kHostKeyUnknown);
  CHECK_THAT(hop.what(), Catch::StartsWith("jumped: a ProxyJump hop (jumper) refused its host key") &&
                             Catch::Contains("No ED25519 host key is known for " + entry) &&
                             Catch::Contains("Host key verification failed"));
  CHECK_FALSE(std::filesystem::exists(files / "a"));
  // Once the hop's key is in its file, the target (accept-new, hvrun's default) is reached and recorded.
  hvrun::testing::write_text(files / "hop", entry + " " + hvrun::testing::read_text(sshd.host_key().string() + ".pub"));
  CHECK(SshSession::connect(target).run("echo via-hop", 10s).out == "via-hop\n");
  CHECK(contains(hvrun::testing::read_text(files / "a"), entry + " ssh-ed25519 "));
}

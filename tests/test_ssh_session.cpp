// SshSession against a throw-away sshd on 127.0.0.1 (tests/sshd_fixture.hpp). Root only; without root
// or /usr/sbin/sshd each case warns and passes. [resolver] cases resolve a name through getaddrinfo_a,
// whose glibc-internal threads ThreadSanitizer cannot follow: run TSan builds with "[ssh]~[resolver]".
#include <openssl/evp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <thread>

#include "launcher/ssh/ssh_session.hpp"
#include "agent/wire/unique_fd.hpp"
#include "tests/sshd_fixture.hpp"

using namespace std::chrono_literals;
using hvrun::SshError;
using hvrun::SshExec;
using hvrun::SshFailure;
using hvrun::SshSession;
using hvrun::SshTarget;
using hvrun::testing::SshdFixture;

namespace {

#define SKIP_WITHOUT_SSHD()                                        \
  do {                                                             \
    if (!hvrun::testing::ssh_tests_can_run()) {                    \
      WARN("skipped: needs root and /usr/sbin/sshd");              \
      return;                                                      \
    }                                                              \
  } while (0)

using Clock = std::chrono::steady_clock;

// Connects and expects an SshError; returns it.
SshError connect_error(const SshTarget& target) {
  try {
    SshSession::connect(target);
  } catch (const SshError& e) {
    return e;
  }
  FAIL("connect to " << target.host << " succeeded");
  throw std::logic_error("unreachable");
}

// Reads fd until EOF (or `timeout`, which fails the test).
std::string read_to_eof(int fd, std::chrono::milliseconds timeout = 10s) {
  std::string data;
  auto deadline = Clock::now() + timeout;
  char buffer[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    REQUIRE(left > 0);
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left));
    if (n <= 0) continue;
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    REQUIRE(got >= 0);
    if (got == 0) return data;
    data.append(buffer, static_cast<std::size_t>(got));
  }
}

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("send failed");
    done += static_cast<std::size_t>(n);
  }
}

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 generator(seed);
  std::string data(size, '\0');
  for (auto& c : data) c = static_cast<char>(generator() & 0xff);
  return data;
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  char two[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(two, sizeof two, "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ssh: connect, run and exec report output and exit status", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshSession session = SshSession::connect(sshd.target());
  CHECK(session.host() == "127.0.0.1");
  CHECK(session.hostname() == "127.0.0.1");
  CHECK(session.port() == sshd.port());
  CHECK(session.user() == "root");

  auto result = session.run("echo hello; echo oops >&2; exit 3", 10s);
  CHECK(result.out == "hello\n");
  CHECK(result.err == "oops\n");
  CHECK(result.exit_status == 3);
  CHECK(session.run("test -x /bin/sh", 10s).exit_status == 0);
  CHECK(session.run("test -x /no/such/file", 10s).exit_status == 1);

  SshExec exec = session.exec("echo hi; echo to-stderr >&2; exit 7");
  CHECK(read_to_eof(exec.fd()) == "hi\n");
  REQUIRE(exec.wait(5s));
  CHECK(exec.exit_status() == 7);
  CHECK(exec.exit_signal().empty());
  CHECK(exec.stderr_tail() == "to-stderr\n");
  CHECK(exec.failure().empty());
}

TEST_CASE("ssh: the exec bridge carries binary data and EOF both ways", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshSession session = SshSession::connect(sshd.target());

  SECTION("4 MiB through cat; the caller's shutdown(SHUT_WR) is the command's EOF") {
    const std::string data = random_bytes(4 << 20, 1);  // every byte value, zeros included
    SshExec exec = session.exec("cat");
    std::thread writer([&] {
      write_all(exec.fd(), data);
      ::shutdown(exec.fd(), SHUT_WR);
    });
    std::string echoed = read_to_eof(exec.fd(), 30s);
    writer.join();
    CHECK(echoed.size() == data.size());
    CHECK(echoed == data);
    REQUIRE(exec.wait(5s));
    CHECK(exec.exit_status() == 0);
  }

  SECTION("the command's exit is the caller's EOF, while the caller still holds its write side") {
    SshExec exec = session.exec("head -c 4; exit 4");
    write_all(exec.fd(), "abcdEFGH");
    CHECK(read_to_eof(exec.fd()) == "abcd");
    REQUIRE(exec.wait(5s));
    CHECK(exec.exit_status() == 4);
  }

  SECTION("a command killed by a signal has no exit status but a signal name") {
    SshExec exec = session.exec("kill -TERM $$");
    CHECK(read_to_eof(exec.fd()).empty());
    REQUIRE(exec.wait(5s));
    CHECK_FALSE(exec.exit_status().has_value());
    CHECK(exec.exit_signal() == "TERM");
  }

  SECTION("release_fd hands the caller's end over") {
    SshExec exec = session.exec("cat");
    hvrun::UniqueFd mine(exec.release_fd());
    CHECK(exec.fd() == -1);
    write_all(mine.get(), "xyz");
    ::shutdown(mine.get(), SHUT_WR);
    CHECK(read_to_eof(mine.get()) == "xyz");
    REQUIRE(exec.wait(5s));
    CHECK(exec.exit_status() == 0);
  }

  SECTION("stderr keeps only its last 4 KiB") {
    SshExec exec = session.exec("head -c 10000 /dev/zero | tr '\\0' a >&2; printf END >&2");
    CHECK(read_to_eof(exec.fd()).empty());
    REQUIRE(exec.wait(5s));
    std::string tail = exec.stderr_tail();
    CHECK(tail.size() == SshExec::kStderrTailBytes);
    CHECK(tail.substr(tail.size() - 4) == "aEND");
  }

  SECTION("backpressure: output waits for a slow reader, and nothing spins meanwhile") {
    SshExec exec = session.exec("head -c 3000000 /dev/zero; exit 5");
    double cpu_before = process_cpu_seconds();
    std::this_thread::sleep_for(500ms);  // the command finishes; its output sits in buffers
    CHECK(process_cpu_seconds() - cpu_before < 0.15);
    CHECK_FALSE(exec.finished());  // not before the caller has taken the output
    CHECK(read_to_eof(exec.fd()).size() == 3000000);
    REQUIRE(exec.wait(5s));
    CHECK(exec.exit_status() == 5);
  }

  SECTION("an idle exec costs no CPU") {
    SshExec exec = session.exec("sleep 2");
    std::this_thread::sleep_for(100ms);
    double cpu_before = process_cpu_seconds();
    std::this_thread::sleep_for(700ms);
    CHECK(process_cpu_seconds() - cpu_before < 0.05);
  }

  SECTION("run() on the same session while an exec is live") {
    SshExec exec = session.exec("cat");
    write_all(exec.fd(), "before ");
    CHECK(session.run("echo side", 10s).out == "side\n");
    write_all(exec.fd(), "after");
    ::shutdown(exec.fd(), SHUT_WR);
    CHECK(read_to_eof(exec.fd()) == "before after");
    REQUIRE(exec.wait(5s));
    CHECK(exec.exit_status() == 0);
  }
}

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
  CHECK(std::string(e.what()) ==
        "127.0.0.1: host key changed (possible man-in-the-middle); remove the old key with: "
        "ssh-keygen -R '[127.0.0.1]:" +
            std::to_string(sshd.port()) + "' -f " + sshd.known_hosts().string());
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
    hvrun::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener.get(), 0) == 0);
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    // Fill the queue (never accepted); Linux then drops further SYNs instead of refusing them.
    std::vector<hvrun::UniqueFd> fillers;
    for (int i = 0; i < 2; ++i) {
      fillers.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      (void)::connect(fillers.back().get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
    std::this_thread::sleep_for(50ms);
    SshTarget target = sshd.target();
    target.port = ntohs(addr.sin_port);
    target.connect_timeout = 500ms;
    auto start = Clock::now();
    SshError e = connect_error(target);
    INFO(e.what());
    CHECK(Clock::now() - start < 3s);
    CHECK(e.failure() == SshFailure::kConnectTimeout);
    CHECK(contains(e.what(), "127.0.0.1: no answer from 127.0.0.1 port " + std::to_string(*target.port) +
                                 " within 0.5 s"));
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
    hvrun::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener.get(), 8) == 0);
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    SshTarget target = sshd.target();
    target.port = ntohs(addr.sin_port);
    target.connect_timeout = 500ms;
    auto start = Clock::now();
    SshError e = connect_error(target);
    INFO(e.what());
    CHECK(Clock::now() - start < 3s);
    CHECK(e.failure() == SshFailure::kConnectTimeout);
    CHECK(contains(e.what(), "127.0.0.1: no SSH answer from 127.0.0.1 port " + std::to_string(*target.port) +
                                 " within 0.5 s"));
  }
}

TEST_CASE("ssh: upload over SFTP creates parents, sets the mode, replaces atomically", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshSession session = SshSession::connect(sshd.target());
  const auto local = sshd.dir() / "agent-local";
  const auto remote = sshd.dir() / "remote" / "cache" / "abc" / "hvrun-agent";

  for (unsigned round = 0; round < 2; ++round) {  // the second upload replaces the first
    const std::string content = random_bytes(700'000 + round * 1000, 10 + round);
    hvrun::testing::write_text(local, content);
    session.upload(local.string(), remote.string(), 0700);
    auto sum = session.run("sha256sum " + remote.string(), 10s);
    REQUIRE(sum.exit_status == 0);
    CHECK(sum.out.substr(0, 64) == sha256_hex(content));
  }
  struct stat info{};
  REQUIRE(::stat(remote.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0700);
  REQUIRE(::stat(remote.parent_path().c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0700);
  std::size_t entries = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator(remote.parent_path())) ++entries;
  CHECK(entries == 1);  // no temporary file left behind

  session.upload(local.string(), (sshd.dir() / "remote" / "script").string(), 0755);
  REQUIRE(::stat((sshd.dir() / "remote" / "script").c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0755);
}

TEST_CASE("ssh: eight sessions connect in parallel threads", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshSession::connect(sshd.target());  // record the host key once, as a first launch would
  constexpr int kSessions = 8;
  std::vector<std::string> outputs(kSessions);
  std::vector<std::string> errors(kSessions);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kSessions; ++i) {
      threads.emplace_back([&, i] {
        try {
          SshSession session = SshSession::connect(sshd.target());
          outputs[i] = session.run("echo " + std::to_string(i), 10s).out;
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
  }
  for (int i = 0; i < kSessions; ++i) {
    INFO("session " << i << ": " << errors[i]);
    CHECK(errors[i].empty());
    CHECK(outputs[i] == std::to_string(i) + "\n");
  }
}

TEST_CASE("ssh: a connection that stops answering is noticed by keepalive", "[ssh][integration]") {
  SKIP_WITHOUT_SSHD();
  SshdFixture sshd;
  SshTarget target = sshd.target();
  target.keepalive_interval = 200ms;
  target.keepalive_count_max = 3;
  SshSession session = SshSession::connect(target);
  SshExec exec = session.exec("sleep 60");
  std::this_thread::sleep_for(700ms);  // idle but answering keepalives: still up
  CHECK_FALSE(exec.finished());
  sshd.sshd().signal_connections(SIGSTOP);  // the host freezes: TCP stays up, nothing answers
  auto start = Clock::now();
  CHECK(read_to_eof(exec.fd(), 5s).empty());
  REQUIRE(exec.wait(5s));
  auto took = Clock::now() - start;
  sshd.sshd().signal_connections(SIGCONT);
  CHECK(took < 2s);
  CHECK(exec.failure().find("127.0.0.1: connection lost") == 0);
  CHECK_FALSE(exec.exit_status().has_value());
  try {
    session.run("true", 5s);
    FAIL("run on a dead connection succeeded");
  } catch (const SshError& e) {
    CHECK(e.failure() == SshFailure::kConnectionLost);
  }
}

// SshSession's use once connected, against a throw-away sshd on 127.0.0.1 (tests/sshd_fixture.hpp): run and
// exec with their output, exit status and backpressure, SFTP upload, parallel sessions, keepalive. How a
// connection is made or refused is test_ssh_connect.cpp. Root only; without root or /usr/sbin/sshd each
// case warns and is skipped.
#include <openssl/evp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <thread>

#include "common/unique_fd.hpp"
#include "launcher/ssh/ssh_session.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/ssh_test.hpp"

using namespace std::chrono_literals;
using namespace hvrun;
using namespace hvrun::testing;

namespace {

using Clock = std::chrono::steady_clock;

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

// Reads `fd` (the exec's socket, or the caller's end of it) to EOF and checks it carried `output`, then
// that the command ends within 5 s with `exit_status`.
void check_output_and_exit(SshExec& exec, int fd, const std::string& output, int exit_status) {
  CHECK(read_to_eof(fd) == output);
  REQUIRE(exec.wait(5s));
  CHECK(exec.exit_status() == exit_status);
}

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

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
  check_output_and_exit(exec, exec.fd(), "hi\n", 7);
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
    check_output_and_exit(exec, exec.fd(), "abcd", 4);
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
    check_output_and_exit(exec, mine.get(), "xyz", 0);
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
    check_output_and_exit(exec, exec.fd(), "before after", 0);
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

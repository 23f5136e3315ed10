#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "launcher/output/output_writer.hpp"

using namespace hvrun;
using namespace std::chrono_literals;

namespace {
struct Pipe {
  int fd[2];
  Pipe() { REQUIRE(::pipe2(fd, O_CLOEXEC) == 0); }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_reader() {
    ::close(fd[0]);
    fd[0] = -1;
  }
  std::string read_all() const {
    std::string s;
    char buf[65536];
    ::fcntl(fd[0], F_SETFL, O_NONBLOCK);
    for (ssize_t n; (n = ::read(fd[0], buf, sizeof buf)) > 0;) s.append(buf, static_cast<std::size_t>(n));
    return s;
  }
};
}  // namespace

TEST_CASE("output writer: writes keep their order per fd and drain() waits for them", "[output]") {
  Pipe a, b;
  OutputWriter w;
  std::string expect_a, expect_b;
  for (int i = 0; i < 1000; ++i) {
    const std::string line = "line " + std::to_string(i) + "\n";
    w.write(i % 3 ? a.fd[1] : b.fd[1], line);
    (i % 3 ? expect_a : expect_b) += line;
  }
  REQUIRE(w.drain(5s));
  CHECK(w.queued_bytes() == 0);
  CHECK(a.read_all() == expect_a);
  CHECK(b.read_all() == expect_b);
}

TEST_CASE("output writer: a reader that stops never blocks write(); relief is reported when it reads again",
          "[output]") {
  Pipe p;
  std::atomic<int> relieved{0};
  OutputWriter w([&] { ++relieved; });
  const std::string chunk(64 * 1024, 'x');
  const auto started = std::chrono::steady_clock::now();
  std::size_t total = 0;
  while (!w.congested()) {  // the pipe holds 64 KiB; the rest waits in the queue
    w.write(p.fd[1], chunk);
    total += chunk.size();
  }
  CHECK(std::chrono::steady_clock::now() - started < 2s);  // write() only queued
  // The writer thread may still move up to one pipe's worth out of the queue after congested() turned
  // true (CI saw 4 MiB - 64 KiB), never more while nobody reads.
  const int pipe_size = ::fcntl(p.fd[1], F_GETPIPE_SZ);
  REQUIRE(pipe_size > 0);
  CHECK(w.queued_bytes() + static_cast<std::size_t>(pipe_size) >= hvrun::kQueueHighWater);
  CHECK_FALSE(w.drain(200ms));
  CHECK(relieved == 0);
  std::size_t got = 0;
  std::thread reader([&] {
    char buf[65536];
    while (got < total) {
      const ssize_t n = ::read(p.fd[0], buf, sizeof buf);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
  });
  CHECK(w.drain(10s));
  reader.join();
  CHECK(got == total);
  CHECK(relieved == 1);
}

TEST_CASE("output writer: destroyed while its reader is stuck, it returns at once and drops the rest", "[output]") {
  Pipe p;
  auto w = std::make_unique<OutputWriter>();
  for (int i = 0; i < 8; ++i) w->write(p.fd[1], std::string(64 * 1024, 'y'));
  std::this_thread::sleep_for(100ms);
  const auto started = std::chrono::steady_clock::now();
  w.reset();
  CHECK(std::chrono::steady_clock::now() - started < 1s);
}

TEST_CASE("output writer: a reader that went away (EPIPE) drops that stream only", "[output]") {
  ::signal(SIGPIPE, SIG_IGN);  // as hvrun does: EPIPE, not a fatal signal
  Pipe gone, alive;
  gone.close_reader();
  OutputWriter w;
  std::atomic<bool> empty{false};
  w.write(gone.fd[1], "lost\n");
  w.write(alive.fd[1], "kept 1\n");
  w.write(gone.fd[1], "lost too\n");
  w.write(alive.fd[1], "kept 2\n");
  REQUIRE(w.drain(5s));
  w.notify_when_empty([&] { empty = true; });
  CHECK(empty);
  CHECK(alive.read_all() == "kept 1\nkept 2\n");
  w.write(gone.fd[1], "dropped at once\n");
  CHECK(w.queued_bytes() == 0);
}

TEST_CASE("output writer: notify_when_empty fires once the queue empties", "[output]") {
  Pipe p;
  OutputWriter w;
  const std::string big(256 * 1024, 'z');
  w.write(p.fd[1], big);
  std::atomic<bool> fired{false};
  w.notify_when_empty([&] { fired = true; });
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(fired);  // 64 KiB in the pipe, the rest waits for the reader
  std::string got;
  while (got.size() < big.size()) {
    char buf[65536];
    const ssize_t n = ::read(p.fd[0], buf, sizeof buf);
    REQUIRE(n > 0);
    got.append(buf, static_cast<std::size_t>(n));
  }
  REQUIRE(w.drain(5s));
  for (int i = 0; i < 100 && !fired; ++i) std::this_thread::sleep_for(10ms);
  CHECK(fired);
  CHECK(got == big);
}

// The launcher's I/O thread (launcher/base/io_thread.hpp): one thread serves many clients, level-triggered
// (bytes left unread wake it again), deadlines, finish() after done, detach() from the owner's thread.
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/unique_fd.hpp"
#include "launcher/base/io_thread.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Threads of this process named as the I/O thread names itself (other tests' threads come and go).
std::size_t io_threads() {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    if (std::getline(comm, name) && name == "hvrun-io") ++n;
  }
  return n;
}

// Reads one byte per service() call (so a second byte must wake it again: level-triggered) and ends at
// EOF; counts calls and remembers the thread it ran on.
class ByteReader final : public hvrun::IoClient {
 public:
  explicit ByteReader(hvrun::UniqueFd fd) : fd_(std::move(fd)), io_(hvrun::IoThread::get()) { io_->attach(*this); }
  ~ByteReader() override { io_->detach(*this); }

  hvrun::IoWant service() override {
    char c;
    const ssize_t n = ::recv(fd_.get(), &c, 1, MSG_DONTWAIT);
    if (n == 0) return {.done = true};
    if (n == 1) bytes.fetch_add(1);
    thread = std::this_thread::get_id();
    hvrun::IoWant want;
    want.fd[1] = fd_.get();
    want.events[1] = POLLIN;
    return want;
  }
  void finish(const std::string& failure) override {
    std::lock_guard lock(mu);
    finished = true;
    this->failure = failure;
    cv.notify_all();
  }
  bool is_finished() {
    std::lock_guard lock(mu);
    return finished;
  }
  bool wait_finished(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [this] { return finished; });
  }

  std::atomic<int> bytes{0};
  std::thread::id thread;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::string failure;

 private:
  hvrun::UniqueFd fd_;
  std::shared_ptr<hvrun::IoThread> io_;
};

// Wakes at deadlines only: `ticks` times, `period` apart, then done.
class Ticker final : public hvrun::IoClient {
 public:
  Ticker(int ticks, std::chrono::milliseconds period) : left_(ticks), period_(period), io_(hvrun::IoThread::get()) {
    io_->attach(*this);
  }
  ~Ticker() override { io_->detach(*this); }
  hvrun::IoWant service() override {
    times.push_back(Clock::now());
    if (left_-- == 0) return {.done = true};
    hvrun::IoWant want;
    want.deadline = Clock::now() + period_;
    return want;
  }
  void finish(const std::string&) override { done.store(true); }
  std::vector<Clock::time_point> times;  // read after done
  std::atomic<bool> done{false};

 private:
  int left_;
  std::chrono::milliseconds period_;
  std::shared_ptr<hvrun::IoThread> io_;
};

template <typename F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 10s) {
  const auto end = Clock::now() + timeout;
  while (!f()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("io thread: one thread serves 300 clients, level-triggered, and ends with the last holder",
          "[io_thread]") {
  REQUIRE(eventually([] { return io_threads() == 0; }));  // another test's may still be ending
  std::vector<hvrun::UniqueFd> writers;
  std::vector<std::unique_ptr<ByteReader>> readers;
  for (int i = 0; i < 300; ++i) {
    auto [a, b] = hvrun::make_socketpair("test");
    writers.push_back(std::move(a));
    readers.push_back(std::make_unique<ByteReader>(std::move(b)));
  }
  CHECK(io_threads() == 1);  // one I/O thread, not one per client
  CHECK(hvrun::IoThread::get()->clients() == 300);
  // Three bytes in one write: each service() reads one, so the other two must wake it again.
  for (auto& w : writers) REQUIRE(::write(w.get(), "abc", 3) == 3);
  REQUIRE(eventually([&] {
    for (auto& r : readers)
      if (r->bytes.load() != 3) return false;
    return true;
  }));
  CHECK(readers[0]->thread != std::this_thread::get_id());
  CHECK(readers[0]->thread == readers[299]->thread);
  // EOF: service() says done, finish() follows with no failure.
  for (auto& w : writers) w.reset();
  for (auto& r : readers) {
    REQUIRE(r->wait_finished(10s));
    CHECK(r->failure.empty());
  }
  CHECK(eventually([] { return hvrun::IoThread::get()->clients() == 0; }));
  readers.clear();
  CHECK(eventually([] { return io_threads() == 0; }));  // the thread ended with the last holder
}

TEST_CASE("io thread: deadlines wake a client with no descriptor", "[io_thread]") {
  Ticker ticker(5, 20ms);
  REQUIRE(eventually([&] { return ticker.done.load(); }));
  REQUIRE(ticker.times.size() == 6);
  for (std::size_t i = 1; i < ticker.times.size(); ++i) CHECK(ticker.times[i] - ticker.times[i - 1] >= 20ms);
}

TEST_CASE("io thread: detach stops a running client at once, finish() is not called, others go on",
          "[io_thread]") {
  auto [a, b] = hvrun::make_socketpair("test");
  auto [c, d] = hvrun::make_socketpair("test");
  auto first = std::make_unique<ByteReader>(std::move(b));
  ByteReader second(std::move(d));
  REQUIRE(::write(a.get(), "x", 1) == 1);
  REQUIRE(eventually([&] { return first->bytes.load() == 1; }));
  first.reset();  // detach from this thread while it is attached
  // Its end is closed now: EPIPE, and no wake-up of a freed client.
  CHECK(::send(a.get(), "y", 1, MSG_NOSIGNAL) == -1);
  REQUIRE(::write(c.get(), "z", 1) == 1);
  REQUIRE(eventually([&] { return second.bytes.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(second.is_finished());
}

TEST_CASE("io thread: a descriptor epoll cannot watch ends that client with the reason", "[io_thread]") {
  // A regular file: epoll_ctl refuses it (EPERM).
  char path[] = "/tmp/hvrun-io-thread-XXXXXX";
  hvrun::UniqueFd file(::mkstemp(path));
  REQUIRE(file);
  ::unlink(path);
  ByteReader reader(std::move(file));
  REQUIRE(reader.wait_finished(10s));
  CHECK_THAT(reader.failure, Catch::Contains("epoll_ctl(EPOLL_CTL_ADD)") && Catch::Contains("Operation not permitted"));
}

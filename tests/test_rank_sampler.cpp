// RankSampler (agent/rank_sampler.hpp): a rank's main thread, read from /proc as its agent reads it,
// split into on a CPU, waiting on peers and waiting on its own data; and the classification of a blocked
// thread's system call on its own.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <functional>
#include <thread>

#include "agent/rank_sampler.hpp"

using hvrun::classify_wait;
using hvrun::ObservedShares;
using hvrun::RankSampler;
using hvrun::WaitClass;
using namespace std::chrono_literals;

namespace {

// A child that does `body` until killed; killed and reaped on destruction.
struct Child {
  pid_t pid = -1;
  explicit Child(const std::function<void()>& body) {
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      body();
      ::_exit(0);
    }
  }
  ~Child() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

// 20 samples 20 ms apart, after the child has had 100 ms to settle into what it does.
ObservedShares observe(pid_t pid) {
  std::this_thread::sleep_for(100ms);
  RankSampler sampler(pid);
  for (int i = 0; i < 20; ++i) {
    REQUIRE(sampler.sample());
    std::this_thread::sleep_for(20ms);
  }
  const auto shares = sampler.take(RankSampler::Clock::now());
  REQUIRE(shares);
  return *shares;
}

}  // namespace

TEST_CASE("rank sampler: a blocked system call classed as peers or own data") {
  const auto targets = [](int fd) -> std::string {
    if (fd == 3) return "socket:[123]";
    if (fd == 4) return "pipe:[77]";
    return "/data/train.bin";
  };
  CHECK(classify_wait('R', "running", targets) == WaitClass::kRunning);
  CHECK(classify_wait('D', "0 0x5 0x7ffd 0x1000 0x0 0x0 0x0 0x7ffd 0x7f00", targets) == WaitClass::kOwnData);
  const std::string futex = std::to_string(SYS_futex) + " 0x7f00 0x80 0x0 0x0 0x0 0x0 0x7ffd 0x7f00";
  CHECK(classify_wait('S', futex, targets) == WaitClass::kPeers);
  const std::string sleep = std::to_string(SYS_clock_nanosleep) + " 0x1 0x0 0x7ffd 0x7ffd 0x0 0x0 0x7ffd 0x7f00";
  CHECK(classify_wait('S', sleep, targets) == WaitClass::kOwnData);
  const auto read_of = [](int fd) {
    return std::to_string(SYS_read) + " 0x" + std::to_string(fd) + " 0x7f00 0x1000 0x0 0x0 0x0 0x7ffd 0x7f00";
  };
  CHECK(classify_wait('S', read_of(3), targets) == WaitClass::kPeers);
  CHECK(classify_wait('S', read_of(4), targets) == WaitClass::kOwnData);
  CHECK(classify_wait('S', read_of(5), targets) == WaitClass::kOwnData);
  CHECK(classify_wait('S', std::to_string(SYS_epoll_wait) + " 0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0", targets) ==
        WaitClass::kPeers);
}

TEST_CASE("rank sampler: a spinning, a sleeping, a socket-reading and a pipe-reading process, each as it is",
          "[integration]") {
  {
    INFO("spinning: on a CPU, or queued for one on a loaded machine");
    Child spinner([] {
      volatile unsigned long n = 0;
      for (;;) n = n + 1;
    });
    const auto s = observe(spinner.pid);
    CHECK(s.busy + s.starved > 0.8);
    CHECK(s.waiting + s.own_data < 0.2);
  }
  {
    INFO("sleeping: its own time, not a peer's");
    Child sleeper([] { ::sleep(30); });
    const auto s = observe(sleeper.pid);
    CHECK(s.own_data > 0.8);
    CHECK(s.busy < 0.1);
  }
  int sockets[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0);
  {
    INFO("reading a socket nobody writes: waiting on a peer");
    Child reader([&] {
      char c;
      (void)::read(sockets[0], &c, 1);
    });
    const auto s = observe(reader.pid);
    CHECK(s.waiting > 0.8);
  }
  ::close(sockets[0]);
  ::close(sockets[1]);
  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);
  {
    INFO("reading a pipe nobody writes: its own data (a data loader's workers)");
    Child reader([&] {
      char c;
      (void)::read(pipe_ends[0], &c, 1);
    });
    const auto s = observe(reader.pid);
    CHECK(s.own_data > 0.8);
  }
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
  {
    INFO("a rank that is gone");
    pid_t gone = 0;
    {
      Child quick([] {});
      gone = quick.pid;
    }
    RankSampler sampler(gone);
    CHECK_FALSE(sampler.sample());
    CHECK_FALSE(sampler.take(RankSampler::Clock::now()));
  }
}

TEST_CASE("rank sampler: the CPUs a process's cgroup quota allows, cgroup v1 or v2, under a given root") {
  // This process's own cgroup line names the path; a fake root holds the quota files for that path.
  std::ifstream in("/proc/self/cgroup");
  std::string line, v1_path, v2_path;
  while (std::getline(in, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (controllers.empty()) v2_path = path;
    if (("," + controllers + ",").find(",cpu,") != std::string::npos) v1_path = path;
  }
  char pattern[] = "/tmp/hvrun-cgroup-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::filesystem::path root = pattern;
  const pid_t self = ::getpid();
  CHECK(hvrun::cgroup_cpu_limit(self, root.string()) == 0);  // nothing there: no quota known
  if (!v1_path.empty()) {
    const auto dir = root / "cpu" / std::filesystem::path(v1_path).relative_path();
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "cpu.cfs_quota_us") << "-1\n";
    std::ofstream(dir / "cpu.cfs_period_us") << "100000\n";
    CHECK(hvrun::cgroup_cpu_limit(self, root.string()) == 0);  // -1: no quota
    std::ofstream(dir / "cpu.cfs_quota_us") << "25000\n";
    CHECK(hvrun::cgroup_cpu_limit(self, root.string()) == Approx(0.25));
  } else {
    const auto dir = root / std::filesystem::path(v2_path).relative_path();
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "cpu.max") << "max 100000\n";
    CHECK(hvrun::cgroup_cpu_limit(self, root.string()) == 0);
    std::ofstream(dir / "cpu.max") << "150000 100000\n";
    CHECK(hvrun::cgroup_cpu_limit(self, root.string()) == Approx(1.5));
  }
  std::filesystem::remove_all(root);
}

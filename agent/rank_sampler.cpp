#include "agent/rank_sampler.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "agent/proc_scan.hpp"

namespace hvrun {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The state letter of /proc/.../stat: the field after the command's closing parenthesis.
char state_of(const std::string& stat_line) {
  const auto close = stat_line.rfind(')');
  return close == std::string::npos || close + 2 >= stat_line.size() ? '?' : stat_line[close + 2];
}

bool reads_a_descriptor(long nr) {
  return nr == SYS_read || nr == SYS_readv || nr == SYS_pread64 || nr == SYS_preadv || nr == SYS_recvfrom ||
         nr == SYS_recvmsg || nr == SYS_write || nr == SYS_writev || nr == SYS_sendto || nr == SYS_sendmsg;
}

bool sleeps(long nr) { return nr == SYS_nanosleep || nr == SYS_clock_nanosleep; }

long long read_number(const std::string& path) {
  const std::string line = read_line(path);
  long long n = 0;
  return std::sscanf(line.c_str(), "%lld", &n) == 1 ? n : -1;
}

}  // namespace

double cgroup_cpu_limit(pid_t pid, const std::string& root) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "ID:CONTROLLERS:PATH": v1 names its controllers, v2's one line has none.
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      unsigned long long quota = 0, period = 0;
      const std::string max = read_line(root + path + "/cpu.max");
      if (std::sscanf(max.c_str(), "%llu %llu", &quota, &period) == 2 && period > 0)
        return static_cast<double>(quota) / static_cast<double>(period);
      continue;
    }
    if (("," + controllers + ",").find(",cpu,") == std::string::npos) continue;
    for (const std::string& mount : {root + "/cpu", root + "/cpu,cpuacct", root + "/cpuacct,cpu"}) {
      const long long quota = read_number(mount + path + "/cpu.cfs_quota_us");
      const long long period = read_number(mount + path + "/cpu.cfs_period_us");
      if (period > 0) return quota > 0 ? static_cast<double>(quota) / static_cast<double>(period) : 0;
    }
  }
  return 0;
}

WaitClass classify_wait(char state, const std::string& syscall_line,
                        const std::function<std::string(int fd)>& fd_target) {
  if (state == 'R' || syscall_line.rfind("running", 0) == 0) return WaitClass::kRunning;
  if (state == 'D') return WaitClass::kOwnData;  // the disk, or a file system that hangs
  long nr = -1;
  unsigned long arg1 = 0;
  std::istringstream in(syscall_line);
  in >> nr >> std::hex >> arg1;
  if (sleeps(nr)) return WaitClass::kOwnData;
  if (reads_a_descriptor(nr) && fd_target) {
    const std::string target = fd_target(static_cast<int>(arg1));
    // A socket reaches a peer; a pipe or a file is the rank's own (a data loader's workers, its dataset).
    return target.rfind("socket:", 0) == 0 || target.empty() ? WaitClass::kPeers : WaitClass::kOwnData;
  }
  return WaitClass::kPeers;  // futex, poll, epoll, select: a collective's wait
}

RankSampler::RankSampler(pid_t pid, std::string stack_dir)
    : pid_(pid),
      task_("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid)),
      since_(Clock::now()),
      where_(std::make_unique<WhereSampler>(pid, std::move(stack_dir))) {
  if (auto s = read_schedstat()) at_since_ = *s;
  if (const auto p = read_proc_stat(pid_)) cpu_ms_at_since_ = p->cpu_ms;
}

long long RankSampler::rss_kb() const {
  // /proc/PID/statm: size, then resident, in pages.
  const std::string line = read_line("/proc/" + std::to_string(pid_) + "/statm");
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(line.c_str(), "%llu %llu", &size, &resident) != 2) return 0;
  static const long page = ::sysconf(_SC_PAGESIZE);
  return static_cast<long long>(resident * static_cast<unsigned long long>(page > 0 ? page : 4096) / 1024);
}

std::optional<RankSampler::SchedStat> RankSampler::read_schedstat() const {
  const std::string line = read_line(task_ + "/schedstat");
  SchedStat s;
  if (std::sscanf(line.c_str(), "%llu %llu", &s.run_ns, &s.delay_ns) != 2) return std::nullopt;
  return s;
}

bool RankSampler::sample(bool may_ask) {
  const std::string stat = read_line(task_ + "/stat");
  if (stat.empty()) return false;
  const char state = state_of(stat);
  // An answer describes a moment the thread ran (it is asked only then), whatever it does now.
  if (const auto spinning = where_->answer()) ++(*spinning ? spinning_ : computing_);
  if (state == 'R') {
    if (may_ask) where_->ask();
    return true;
  }
  const std::string fd_dir = "/proc/" + std::to_string(pid_) + "/fd/";
  const WaitClass c = classify_wait(state, read_line(task_ + "/syscall"), [&fd_dir](int fd) {
    char target[256];
    const ssize_t n = ::readlink((fd_dir + std::to_string(fd)).c_str(), target, sizeof target - 1);
    return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
  });
  if (c == WaitClass::kPeers) ++peers_;
  if (c == WaitClass::kOwnData) ++own_;
  return true;
}

std::optional<ObservedShares> RankSampler::take(Clock::time_point now) {
  const auto s = read_schedstat();
  if (!s) return std::nullopt;
  const double window_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - since_).count());
  const int blocked_samples = peers_ + own_;
  ObservedShares out;
  if (window_ns > 0) {
    out.busy = std::clamp(static_cast<double>(s->run_ns - at_since_.run_ns) / window_ns, 0.0, 1.0);
    out.starved = std::clamp(static_cast<double>(s->delay_ns - at_since_.delay_ns) / window_ns, 0.0, 1.0 - out.busy);
    const double blocked = 1.0 - out.busy - out.starved;
    if (blocked_samples > 0) {
      out.waiting = blocked * peers_ / blocked_samples;
      out.own_data = blocked * own_ / blocked_samples;
    } else {
      out.waiting = blocked;  // never seen blocked: what little is left counts as waiting on peers
    }
    // Running (or runnable) inside a communication library is waiting for peers by polling.
    if (spinning_ + computing_ > 0) {
      const double part = static_cast<double>(spinning_) / (spinning_ + computing_);
      out.waiting += (out.busy + out.starved) * part;
      out.busy *= 1 - part;
      out.starved *= 1 - part;
    }
  }
  out.cpu_limit = cgroup_cpu_limit(pid_);
  if (const auto p = read_proc_stat(pid_)) {
    out.cpu_ms = std::max(0LL, p->cpu_ms - cpu_ms_at_since_);
    cpu_ms_at_since_ = p->cpu_ms;
  }
  out.rss_kb = rss_kb();
  since_ = now;
  at_since_ = *s;
  peers_ = own_ = spinning_ = computing_ = 0;
  return out;
}

}  // namespace hvrun

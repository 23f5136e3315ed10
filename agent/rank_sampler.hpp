#pragma once
// Issue 40, the agent's half: what one rank's main thread did over a window, read from /proc without
// touching the program (same user, the rank's parent: no ptrace). Its schedstat says how long it ran on
// a CPU and how long it was runnable but waited for one (the run queue, and a cgroup quota's throttling,
// which keeps it queued); samples of its state and current system call split the rest, the time it was
// blocked, into waiting on peers (a collective: futex, poll, epoll, select, a socket) and waiting on its
// own data (a file or pipe read, the disk, a sleep). StragglerWatch (launcher/job/straggler_watch.hpp)
// compares the shares across ranks.
//
// The main thread stands for the rank: a training loop runs there (torchrun's form sets
// OMP_NUM_THREADS=1; with intra-op threads the main thread waits on them in a futex and reads as waiting).
// A running main thread is asked where it is (WhereSampler): its time on a CPU inside a communication
// library (MPI's progress loop, Horovod's synchronize) is waiting on peers, not computing.
#include <sys/types.h>

#include "agent/where_sampler.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>

namespace hvrun {

struct ObservedShares {
  double busy = 0;      // on a CPU
  double starved = 0;   // runnable, not running
  double waiting = 0;   // blocked on peers
  double own_data = 0;  // blocked on its own input
  double cpu_limit = 0; // the CPUs its cgroup's quota allows (0: no quota)
  long long cpu_ms = 0;  // CPU time of the whole process (all its threads) in the window
  long long rss_kb = 0;  // its resident set at the window's end
};

// The CPUs the cpu cgroup of `pid` may use by its quota (v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2
// cpu.max), or 0 where it has none or it cannot be read. `root`: where cgroup file systems are mounted.
double cgroup_cpu_limit(pid_t pid, const std::string& root = "/sys/fs/cgroup");

// What a blocked thread waits for, from its /proc/PID/task/TID/syscall line and state.
enum class WaitClass { kRunning, kPeers, kOwnData };
// `syscall_line` as the kernel writes it ("running", or "NR ARG1 ... SP PC", or "-1 SP PC"); `state` from
// its stat; `fd_target` reads a descriptor's link (/proc/PID/fd/N: "socket:[...]", "pipe:[...]", a path).
WaitClass classify_wait(char state, const std::string& syscall_line,
                        const std::function<std::string(int fd)>& fd_target);

class RankSampler {
 public:
  using Clock = std::chrono::steady_clock;
  // `stack_dir`: where the rank's preloaded library answers where it is (RankTools::stack_dir()); empty:
  // running counts as computing.
  explicit RankSampler(pid_t pid, std::string stack_dir = {});

  // One look at the main thread's wait (call every 100 ms or so). False once the rank is gone.
  // `may_ask`: whether a running thread may be asked where it is (not while hvrun collects stacks: both
  // asks are SIGURG, a signal that does not queue, so one pending would swallow the other).
  bool sample(bool may_ask = true);
  // The shares since the previous take() (or since the start); nullopt for a window without samples or
  // when the rank is gone.
  std::optional<ObservedShares> take(Clock::time_point now);

 private:
  struct SchedStat {
    unsigned long long run_ns = 0, delay_ns = 0;
  };
  std::optional<SchedStat> read_schedstat() const;
  long long rss_kb() const;

  pid_t pid_;
  std::string task_;  // /proc/PID/task/PID
  Clock::time_point since_;
  SchedStat at_since_{};
  long long cpu_ms_at_since_ = 0;
  int peers_ = 0, own_ = 0;  // blocked samples of each class in this window
  std::unique_ptr<WhereSampler> where_;
  int spinning_ = 0, computing_ = 0;  // running samples answered, inside a communication library or not
};

}  // namespace hvrun

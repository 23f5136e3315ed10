#pragma once
// Test support: runs a program (usually hvrun) with captured stdout/stderr and a deadline, and finds
// processes by a marker in their environment, so leftover checks never match by a broad name.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun::test {

struct ChildResult {
  int exit_code = -1;  // 128+N when killed by signal N; -1 when the deadline killed it
  std::string out, err;
  std::chrono::milliseconds elapsed{0};
  long max_rss_kib = 0;  // the child's peak resident set (wait4's ru_maxrss)
};

class ChildProcess {
 public:
  // Starts argv with the current environment plus `extra_env` ("K=V").
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});
  ~ChildProcess();  // kills and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until `needle` has appeared `count` times on stdout or the timeout passes.
  bool wait_for_stdout(const std::string& needle, int count, std::chrono::milliseconds timeout);
  // Reads until the child exits (killed with SIGKILL at the deadline).
  ChildResult wait(std::chrono::milliseconds timeout);
  void signal(int sig);
  // While held, the child's stdout is not read: it fills its pipe and blocks in write(), as behind a
  // paused terminal. wait() reads it again.
  void hold_stdout(bool held) { stdout_held_ = held; }
  // Reads output for `duration` (stdout only when not held).
  void pump_for(std::chrono::milliseconds duration);
  const std::string& stderr_so_far() const { return err_; }
  const std::string& stdout_so_far() const { return out_; }

 private:
  void pump(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool stdout_held_ = false;
  std::string out_, err_;
  std::chrono::steady_clock::time_point started_;
};

// Runs to completion.
ChildResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                const std::vector<std::string>& extra_env = {});

// True when `pid` has exited but is not reaped yet (state Z in /proc/PID/stat), or is gone.
bool is_zombie_or_gone(pid_t pid);

// Processes whose environment holds `marker` (a "NAME=value" string), excluding zombies.
std::vector<pid_t> processes_with_marker(const std::string& marker);
// Polls until at least `count` such processes exist or the timeout passes; returns how many there are.
// /proc/PID/environ reads empty while a process execs, so a single count right after a rank prints can
// miss one that is exec'ing at that moment.
std::size_t wait_for_marker_count(const std::string& marker, std::size_t count, std::chrono::milliseconds timeout);
// Polls until no such process remains or the timeout passes; returns what is left.
std::vector<pid_t> wait_until_gone(const std::string& marker, std::chrono::milliseconds timeout);
// A marker unique to this call: "HVRUN_TEST_MARKER=<pid>-<counter>-<random>".
std::string unique_marker();

std::string hvrun_bin();   // path of the built hvrun
std::string source_dir();

}  // namespace hvrun::test

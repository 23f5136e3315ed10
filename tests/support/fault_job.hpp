#pragma once
// Test support for the fault catalogue on a network-namespace lab (test_faults.cpp,
// test_faults_stacks.cpp): hvrun runs on lab host 0 and its ranks on hosts 1 and 2 over SSH (FaultJob).
// For each fault: hvrun's exit code, teardown of every rank everywhere within the kill grace plus a
// second, no rank and no agent left (ranks are found by a marker in their environment, agents by the
// pids hvrun --verbose names), and hvrun's peak memory.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

namespace hvrun::test {

inline constexpr std::chrono::seconds kGrace{2};  // --kill-grace of every run here
// A rank that waits for the trigger file looks for it this often: the slack a measured teardown gets.
inline constexpr std::chrono::milliseconds kTriggerPoll{100};
// hvrun's own peak RSS in every case, floods included: flow control bounds it, not the output's size.
// AddressSanitizer's shadow and quarantine add a few hundred MiB of their own.
extern const long kMaxRssKib;

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t0);

// hvrun's own crash, in its own lines: rank output ("[3]<stderr>:...") and the reports' quotes of it
// (indented) may hold these words on purpose.
bool has_crash_text(const std::string& err);

// The processes of this job's rank `rank` (the marker and HVRUN_RANK both in their environment).
std::vector<pid_t> rank_processes(const std::string& marker, int rank);

// A memory cgroup of its own with a small limit and no swap, removed at the end: cgroup v2 where the
// memory controller is there, else v1's memory hierarchy. `unavailable` says why neither can be made.
struct MemoryCgroup {
  std::filesystem::path dir;
  std::string unavailable;

  explicit MemoryCgroup(long bytes);
  ~MemoryCgroup();
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;
  bool add(pid_t pid) const;
};

// A job on hosts 1 and 2 (two ranks each: ranks 0,1 on host 1; 2,3 on host 2) whose fault the test
// sets off by creating the trigger file that the shell snippet `wait_trigger` waits for.
struct FaultJob {
  const Lab& lab;
  const TempHome& home;
  std::string marker = unique_marker();
  std::filesystem::path trigger;
  std::unique_ptr<ChildProcess> hvrun;
  std::map<std::string, pid_t> agents;
  std::chrono::steady_clock::time_point t0;

  FaultJob(const Lab& l, const TempHome& h);
  ~FaultJob();
  FaultJob(const FaultJob&) = delete;
  FaultJob& operator=(const FaultJob&) = delete;

  std::string wait_trigger() const { return "while [ ! -e " + trigger.string() + " ]; do sleep 0.1; done; "; }

  // Starts hvrun with `extra` options and `script` as each rank's `sh -c`, and waits for `ready`
  // lines from all ranks that print one.
  void start(const std::vector<std::string>& extra, const std::string& script, int ready = 4);

  void fire();
  void mark() { t0 = std::chrono::steady_clock::now(); }

  // Waits for hvrun; checks that it left nothing and stayed small; returns what it said.
  ChildResult finish(std::chrono::milliseconds limit = std::chrono::seconds(30));
  std::chrono::milliseconds last_teardown{0};

  // hvrun killed by SIGKILL: its agents see their channel close and end everything there.
  void kill_hvrun();

  // Host `i` cut off mid-run (all its packets dropped): hvrun ends with exit 1 (last_teardown: how long
  // that took), and the host's own agent, hearing nothing, ends everything there within `within`. The
  // host is joined again before this returns.
  ChildResult cut_off(int i, std::chrono::milliseconds within);
};

}  // namespace hvrun::test

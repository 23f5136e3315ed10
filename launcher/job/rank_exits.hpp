#pragma once
// Rank-exit accounting: which host runs each rank, which ranks have ended (reported by their agent,
// or gone with it), and how a failed rank's end reads in hvrun's report.
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/output/stderr_digest.hpp"

namespace hvrun {

class RankExits {
 public:
  explicit RankExits(int ranks = 0) : host_of_(static_cast<std::size_t>(ranks)), exited_(host_of_.size()) {}

  // Host `host` (the job's index) runs ranks first_rank .. first_rank + count - 1.
  void assign(std::size_t host, int first_rank, int count);
  int size() const { return static_cast<int>(host_of_.size()); }
  std::size_t host_of(int rank) const { return host_of_.at(static_cast<std::size_t>(rank)); }
  // `rank` is a rank of this job that runs on `host` (a message about any other is a protocol error).
  bool runs_on(int rank, std::size_t host) const;

  // The agent reported the rank's exit; false when it had already (a protocol error).
  bool record(int rank);
  // Ranks the agent of `host` never reported are gone with it: it kills them when its channel closes.
  void mark_host_exited(std::size_t host);
  int exited() const { return exited_count_; }
  int running() const { return size() - exited_count_; }
  bool all_exited() const { return exited_count_ == size(); }
  // The hosts (the job's indexes, ascending) with a rank not yet ended.
  std::vector<std::size_t> hosts_running() const;

 private:
  struct Range {
    int first = 0;
    int count = 0;
  };
  std::vector<std::size_t> host_of_;
  std::vector<bool> exited_;
  std::vector<Range> by_host_;
  int exited_count_ = 0;
};

// "exited with code 3", "killed by SIGSEGV", "killed by SIGKILL, sent by the kernel's OOM killer (...);
// peak RSS 70 MiB", or the agent's reason it could not start the rank.
std::string describe_exit(const ExitedMsg& m);
// The rank ended other than with code 0.
bool exit_failed(const ExitedMsg& m);
// hvrun's exit code for a failed rank: its own code, or 127 when it could not be executed.
int failed_rank_exit_code(const ExitedMsg& m);
// hvrun's report of a failed rank, whole, each of hvrun's lines with its prefix (logged with log_report):
// which rank, where, how it ended and why as far as known (the fault address of a crash, the exception
// of a traceback), then its crash report whole (`digest`: the few stderr lines before it, Python's
// frames and the native stack, C++ names demangled) or else its last stderr lines (`stderr_tail`; neither for a rank that never
// started), and how many ranks still run (`others`), which hvrun now stops.
std::string rank_failure_report(const ExitedMsg& m, const std::string& host, const StderrDigest& digest,
                                const std::deque<std::string>& stderr_tail, int others);
// `line` with each mangled C++ name ("_ZN4gloo...") in a native frame demangled.
std::string demangle_frame(const std::string& line);

}  // namespace hvrun

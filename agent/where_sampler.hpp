#pragma once
// Issue 40: where a running rank's main thread is, for the ranks that wait by spinning. A thread blocked
// in a system call shows what it waits for in /proc (RankSampler), but a rank that polls for its peers
// runs all the time: Open MPI's progress loop, Horovod's synchronize (a loop around its handle's state),
// UCX, libfabric. Asked with SIGURG (crash_report::kWhereRequest, to the main thread only), the library
// hvrun preloads into every rank (agent/crash_handler/) writes the addresses of the thread's native
// frames to a file; they are placed in the rank's mapped files (/proc/PID/maps) here, and a stack that
// passes through a communication library reads as waiting on peers, any other as computing.
//
// A rank without the library (HVRUN_CRASH_HANDLER=0, a static program) ignores SIGURG: after
// kUnansweredLimit asks without a single answer it is asked no more.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

// Whether the file mapped at `path` is a library whose code a rank runs while it waits for its peers:
// MPI (Open MPI's libraries and components, MPICH), its transports (UCX, libfabric, PSM), Gloo, NCCL,
// Horovod's own modules, hvrun's collectives.
bool is_communication_library(std::string_view path);

// SIGURG with `request` (crash_report::kStackRequest or kWhereRequest) as its value, to the main thread
// of `pid` (its tid is its pid): what the preloaded library answers. False when the process is gone or
// refuses signals from us.
bool ask_main_thread(pid_t pid, int request);

class WhereSampler {
 public:
  static constexpr int kUnansweredLimit = 20;

  // `stack_dir`: where the rank's library writes (RankTools::stack_dir()); empty: nothing is asked.
  WhereSampler(pid_t pid, std::string stack_dir);
  ~WhereSampler();  // removes an answer not read
  WhereSampler(const WhereSampler&) = delete;
  WhereSampler& operator=(const WhereSampler&) = delete;
  WhereSampler(WhereSampler&&) = default;
  WhereSampler& operator=(WhereSampler&&) = default;

  // Asks where the main thread is now (one signal; the answer comes within microseconds of the thread
  // running). Nothing once the rank has proved not to answer.
  void ask();
  // The answer to an ask() that came since the last call, removed once read: true when its stack passes
  // through a communication library. nullopt: none came.
  std::optional<bool> answer();

 private:
  struct Mapping {
    std::uintptr_t start = 0, end = 0;
    bool communication = false;
  };
  void read_maps();
  // The mapping that holds `addr`; nullptr outside every executable file mapping.
  const Mapping* mapping_of(std::uintptr_t addr) const;

  pid_t pid_ = 0;
  std::string answer_path_;  // empty: nothing is asked
  std::vector<Mapping> maps_;
  int unanswered_ = 0;
  bool answered_ever_ = false;
};

}  // namespace hvrun

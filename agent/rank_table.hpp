#pragma once
// The ranks this agent started, without processes: which rank each child pid is, which have been
// reaped, and each rank's exit report, made once. Slots number the ranks in the order they started
// (add()); the agent (agent.cpp) keeps each rank's pipes under its slot. Also what a rank's exit report
// says, from a wait status or a failed spawn, and the environment a rank starts with.
#include <sys/resource.h>

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "common/exit_status.hpp"

namespace hvrun {

class RankTable {
 public:
  struct Entry {
    int rank = 0;
    pid_t pid = -1;  // also the rank's process group
    bool reaped = false;
  };
  struct Reaped {
    std::size_t slot = 0;
    ExitedMsg exit;
  };

  // A rank that is running as `pid`; returns its slot.
  std::size_t add(int rank, pid_t pid);
  // The agent reaped `pid` with `wait_status` (waitpid's): the rank it was, its slot and its exit
  // report; nullopt for a child that is not one of the ranks, or a rank already reported.
  std::optional<Reaped> reap(pid_t pid, int wait_status);
  // Likewise, from the status its Child handle reaped.
  std::optional<Reaped> reap(pid_t pid, const ExitStatus& status);

  // Every rank of the current attempt, reaped or not: a reaped rank's group may still hold what the
  // rank left behind, and the group signals reach it.
  std::span<const Entry> entries() const { return std::span<const Entry>(entries_).subspan(first_current_); }
  // Any slot, of this attempt or an earlier one (an earlier rank's pipes may still be read).
  const Entry& at(std::size_t slot) const { return entries_.at(slot); }
  // --max-restarts: the ranks started so far are done with, and entries() lists only those added from
  // now on (what they left behind is reached through the agent's descendants, not their old groups,
  // whose numbers the kernel may reuse). Returns false, changing nothing, while one is not reaped.
  bool retire_all();

 private:
  std::vector<Entry> entries_;
  std::size_t first_current_ = 0;  // entries_ before it belong to earlier attempts
  std::map<pid_t, std::size_t> slot_of_;  // the current attempt's
};

// The exit report of `rank` from waitpid's status: its exit code, or 128 + N and the signal N that
// killed it.
ExitedMsg exit_report(int rank, int wait_status);
// The rank's peak RSS and CPU time (user + system) into its exit, from wait4's `usage`.
void add_usage(ExitedMsg& exit, const rusage& usage);
// Who sent the SIGKILL that ended a rank, as the exit report's `cause`: the OOM killer (its kernel log
// record, KernelLog::oom_kill_of), hvrun itself (after the kill grace), or someone else; the last is
// certain only when the kernel log could be read.
// Where the kernel log cannot be read, `cgroup_oom_kills_grew` (the agent's memory cgroup counted an
// OOM kill since the previous look; nullopt: not known) decides instead, naming `cgroup`.
std::string sigkill_cause(bool by_hvrun, const std::optional<std::string>& oom_record, bool kernel_log_readable,
                          std::optional<bool> cgroup_oom_kills_grew = std::nullopt, const std::string& cgroup = {});
// The exit report of a rank that never ran: kSpawnFailedExitCode (a shell's "command not found") and
// why.
inline constexpr int kSpawnFailedExitCode = 127;
ExitedMsg spawn_failure_report(int rank, std::string reason);

// "NAME=value" for each variable rank `r` of `launch` starts with: the launch's common environment,
// with the rank's own (the rank contract) over it; sorted by name.
std::vector<std::string> rank_environment(const LaunchMsg& launch, const RankLaunch& r);

}  // namespace hvrun

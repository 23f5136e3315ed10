#pragma once
// What /proc tells of this host's processes, read without ptrace: the processes of a process group
// (a rank's group is its pid), their CPU time, and what the kernel says a process waits in.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace hvrun {

struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';       // R, S, D, Z, T, ...
  std::string comm;
  long long cpu_ms = 0;   // utime + stime
};

// /proc/PID/stat parsed; nullopt for a process that is gone (or unreadable).
std::optional<ProcStat> read_proc_stat(pid_t pid);
// Every process whose process group is `pgrp`, the leader first when it is alive.
std::vector<ProcStat> processes_in_group(pid_t pgrp);
// Several groups in one pass over /proc: result[i] for groups[i].
std::vector<std::vector<ProcStat>> processes_in_groups(const std::vector<pid_t>& groups);

// Every child of `parent`, zombies included (ended, not yet reaped): from its children files, or from
// one pass over every process where the kernel has none.
std::vector<pid_t> children_of(pid_t parent);

// Every living process that descends from `ancestor` (children, theirs, and so on), in one pass over
// /proc; zombies left out (they are dead already, waiting to be reaped). A process whose parent dies is
// reparented to the nearest subreaper, so under an agent that is one (PR_SET_CHILD_SUBREAPER) this is
// everything its ranks started, including what left their process group and session (setsid, a
// double fork).
// By default only that tree is read, through /proc/PID/task/TID/children; where the kernel has no such
// file, or with kFullScan, every process on the host is read once.
enum class DescendantWalk { kChildrenFiles, kFullScan };
std::vector<pid_t> living_descendants_of(pid_t ancestor, DescendantWalk walk = DescendantWalk::kChildrenFiles);

// What the kernel says `pid` waits in, for a process that cannot say it itself: its state, wchan, and
// its kernel stack where readable (/proc/PID/stack needs root), as lines.
std::string kernel_wait_text(pid_t pid);

}  // namespace hvrun

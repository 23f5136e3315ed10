#pragma once
// The kernel's log (/dev/kmsg) from the agent's start on, read for one thing: the OOM killer's
// "Killed process PID (COMM) ..." record of a rank that died of SIGKILL. /dev/kmsg is readable by
// root, and by everyone where kernel.dmesg_restrict is 0; elsewhere readable() is false and an OOM
// kill cannot be told apart from another SIGKILL.
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

#include "common/unique_fd.hpp"

namespace hvrun {

class KernelLog {
 public:
  // Opens /dev/kmsg at its end; never throws.
  KernelLog();
  bool readable() const { return static_cast<bool>(fd_); }
  // The OOM killer's record for `pid` since the agent started ("Memory cgroup out of memory: Killed
  // process 4883 (python3) total-vm:82228kB, anon-rss:65152kB, ..."), without the record's prefix.
  std::optional<std::string> oom_kill_of(pid_t pid);

 private:
  void read_new();
  UniqueFd fd_;
  std::map<pid_t, std::string> killed_;  // the latest records only (bounded)
};

// How many OOM kills the memory cgroup of this process has counted (cgroup v2's memory.events
// oom_kill, else v1's memory.oom_control oom_kill), and that cgroup's path; nullopt where neither can
// be read. Ranks start in the agent's cgroup (a Slurm step's, a systemd slice's), so a count that grew
// while a rank died of SIGKILL tells an OOM kill where the kernel log cannot be read.
struct CgroupOomCount {
  std::string cgroup;
  long kills = 0;
};
std::optional<CgroupOomCount> own_cgroup_oom_kills();

// The OOM record's text in the words of a report: "the kernel's OOM killer (memory cgroup out of
// memory; anon-rss 65152 kB)". Pure, for the tests.
std::string oom_kill_words(const std::string& record);

}  // namespace hvrun

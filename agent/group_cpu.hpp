#pragma once
// The CPU that processes groups used between two looks (the agent's heartbeat carries its ranks': a
// launcher that sees a job's CPU stop tells a hang from a slow step). Read from /proc (proc_scan).
#include <sys/types.h>

#include <map>
#include <vector>

namespace hvrun {

class GroupCpu {
 public:
  // Milliseconds of CPU that the processes of `groups` used since the previous call: a process new since
  // then counts whole, one gone since then no more.
  int since_last(const std::vector<pid_t>& groups);
  void reset() { seen_.clear(); }  // the next call counts every process whole

 private:
  std::map<pid_t, long long> seen_;  // each process's CPU at the previous call
};

}  // namespace hvrun

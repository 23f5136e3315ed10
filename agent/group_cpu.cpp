#include "agent/group_cpu.hpp"

#include <algorithm>
#include <climits>

#include "agent/proc_scan.hpp"

namespace hvrun {

int GroupCpu::since_last(const std::vector<pid_t>& groups) {
  if (groups.empty()) return 0;
  std::map<pid_t, long long> now;
  long long used = 0;
  for (const auto& group : processes_in_groups(groups))
    for (const ProcStat& p : group) {
      const auto before = seen_.find(p.pid);
      used += p.cpu_ms - (before == seen_.end() ? 0 : std::min(before->second, p.cpu_ms));
      now[p.pid] = p.cpu_ms;
    }
  seen_ = std::move(now);
  return static_cast<int>(std::min<long long>(used, INT_MAX));
}

}  // namespace hvrun

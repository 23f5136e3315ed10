#include "agent/rank_table.hpp"

#include <algorithm>
#include <climits>
#include <utility>

#include "agent/kernel_log.hpp"
#include "common/crash_report.hpp"
#include "common/exit_status.hpp"

namespace hvrun {

std::size_t RankTable::add(int rank, pid_t pid) {
  entries_.push_back({rank, pid, false});
  slot_of_[pid] = entries_.size() - 1;
  return entries_.size() - 1;
}

bool RankTable::retire_all() {
  for (const Entry& e : entries())
    if (!e.reaped) return false;
  first_current_ = entries_.size();
  slot_of_.clear();
  return true;
}

std::optional<RankTable::Reaped> RankTable::reap(pid_t pid, int wait_status) {
  return reap(pid, ExitStatus::of(wait_status));
}

std::optional<RankTable::Reaped> RankTable::reap(pid_t pid, const ExitStatus& status) {
  const auto it = slot_of_.find(pid);
  if (it == slot_of_.end()) return std::nullopt;
  Entry& e = entries_[it->second];
  if (e.reaped) return std::nullopt;
  e.reaped = true;
  return Reaped{it->second, ExitedMsg{e.rank, status.code, status.signal, {}, {}, 0}};
}

ExitedMsg exit_report(int rank, int wait_status) {
  const ExitStatus status = ExitStatus::of(wait_status);
  return ExitedMsg{rank, status.code, status.signal, {}, {}, 0};
}

std::string sigkill_cause(bool by_hvrun, const std::optional<std::string>& oom_record, bool kernel_log_readable,
                          std::optional<bool> cgroup_oom_kills_grew, const std::string& cgroup) {
  if (oom_record) return "sent by " + oom_kill_words(*oom_record);
  if (by_hvrun) return "sent by hvrun: the rank had not ended within the kill grace after SIGTERM";
  if (kernel_log_readable) return "sent from outside hvrun (not by the OOM killer: the kernel log has no OOM kill of it)";
  if (cgroup_oom_kills_grew && *cgroup_oom_kills_grew)
    return std::string(crash_report::kOomKillCause) + " (its memory cgroup " + cgroup + " counted an OOM kill)";
  if (cgroup_oom_kills_grew)
    return "sent from outside hvrun (not by the OOM killer: its memory cgroup " + cgroup + " counted no OOM kill)";
  return "sent from outside hvrun or by the OOM killer (the kernel log is not readable here to tell which)";
}

ExitedMsg spawn_failure_report(int rank, std::string reason) {
  return ExitedMsg{rank, kSpawnFailedExitCode, 0, std::move(reason), {}, 0};
}

std::vector<std::string> rank_environment(const LaunchMsg& launch, const RankLaunch& r) {
  auto env = launch.env;
  for (const auto& [k, v] : r.env) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

void add_usage(ExitedMsg& exit, const rusage& u) {
  exit.peak_rss_kb = static_cast<int>(std::min<long>(u.ru_maxrss, INT_MAX));
  exit.cpu_ms = (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000LL + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
}

}  // namespace hvrun

#include "launcher/job/rank_exits.hpp"

#include "agent/wire/exit_status.hpp"
#include "agent/wire/log.hpp"
#include "launcher/base/exit_codes.hpp"

namespace hvrun {

void RankExits::assign(std::size_t host, int first_rank, int count) {
  if (by_host_.size() <= host) by_host_.resize(host + 1);
  by_host_[host] = Range{first_rank, count};
  for (int r = first_rank; r < first_rank + count; ++r) host_of_.at(static_cast<std::size_t>(r)) = host;
}

bool RankExits::runs_on(int rank, std::size_t host) const {
  return rank >= 0 && rank < size() && host_of_[static_cast<std::size_t>(rank)] == host;
}

bool RankExits::record(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  if (exited_.at(r)) return false;
  exited_[r] = true;
  ++exited_count_;
  return true;
}

void RankExits::mark_host_exited(std::size_t host) {
  if (host >= by_host_.size()) return;
  const Range& range = by_host_[host];
  for (int r = range.first; r < range.first + range.count; ++r)
    if (!exited_[static_cast<std::size_t>(r)]) {
      exited_[static_cast<std::size_t>(r)] = true;
      ++exited_count_;
    }
}

std::string describe_exit(const ExitedMsg& m) {
  if (!m.error.empty()) return m.error;
  if (m.signal != 0) return "killed by " + signal_name(m.signal);
  return "exited with code " + std::to_string(m.exit_code);
}

bool exit_failed(const ExitedMsg& m) { return m.exit_code != 0 || m.signal != 0 || !m.error.empty(); }

int failed_rank_exit_code(const ExitedMsg& m) { return !m.error.empty() ? kExitCannotExecute : m.exit_code; }

std::string rank_failure_report(const ExitedMsg& m, const std::string& host, const std::deque<std::string>& stderr_tail,
                                int others) {
  const std::string prefix(kHvrunLogPrefix);  // each of hvrun's lines, as its log pattern writes them
  std::string text = prefix + "rank " + std::to_string(m.rank) + " on " + host + ": " + describe_exit(m);
  if (!stderr_tail.empty() && m.error.empty()) {
    text += "; its last stderr lines:";
    for (const auto& line : stderr_tail) text += "\n    " + line;
  }
  if (others > 0) text += "\n" + prefix + "stopping the other " + std::to_string(others) + " ranks";
  return text;
}

}  // namespace hvrun

#include "launcher/job/rank_exits.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "common/crash_report.hpp"
#include "common/exit_status.hpp"
#include "common/log.hpp"
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

std::vector<std::size_t> RankExits::hosts_running() const {
  std::vector<std::size_t> out;
  for (std::size_t r = 0; r < exited_.size(); ++r)
    if (!exited_[r] && std::find(out.begin(), out.end(), host_of_[r]) == out.end()) out.push_back(host_of_[r]);
  std::sort(out.begin(), out.end());
  return out;
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
  if (m.signal == 0) return "exited with code " + std::to_string(m.exit_code);
  std::string text = "killed by " + signal_name(m.signal);
  if (!m.cause.empty()) text += ", " + m.cause;
  if (m.cause.rfind(crash_report::kOomKillCause, 0) == 0 && m.peak_rss_kb > 0)
    text += "; peak RSS " + std::to_string((m.peak_rss_kb + 512) / 1024) + " MiB";
  return text;
}

std::string demangle_frame(const std::string& line) {
  // "  #3 0xADDR NAME+0xOFF (file)": NAME is the fourth word, up to its '+'.
  const auto name_at = line.find(" _Z");
  if (name_at == std::string::npos) return line;
  const auto end = line.find('+', name_at);
  if (end == std::string::npos) return line;
  const std::string mangled = line.substr(name_at + 1, end - name_at - 1);
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> plain(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                          &std::free);
  if (status != 0 || !plain) return line;
  return line.substr(0, name_at + 1) + plain.get() + line.substr(end);
}

bool exit_failed(const ExitedMsg& m) { return m.exit_code != 0 || m.signal != 0 || !m.error.empty(); }

int failed_rank_exit_code(const ExitedMsg& m) { return !m.error.empty() ? kExitCannotExecute : m.exit_code; }

std::string rank_failure_report(const ExitedMsg& m, const std::string& host, const StderrDigest& digest,
                                const std::deque<std::string>& stderr_tail, int others) {
  const std::string prefix(kHvrunLogPrefix);  // each of hvrun's lines, as its log pattern writes them
  std::string text = prefix + "rank " + std::to_string(m.rank) + " on " + host + ": " + describe_exit(m);
  const auto crash = m.error.empty() && m.signal != 0 ? digest.crash_report() : std::vector<std::string>{};
  if (!crash.empty()) {
    if (digest.fault_address()) text += " at address " + *digest.fault_address();
    text += "; its last stderr lines:";
    for (const auto& line : digest.lines_before_crash()) text += "\n    " + line;
    for (const auto& line : crash) text += "\n    " + demangle_frame(line);
  } else {
    if (m.error.empty() && m.signal == 0 && !digest.exception().empty()) text += ": " + digest.exception();
    if (!stderr_tail.empty() && m.error.empty()) {
      text += "; its last stderr lines:";
      for (const auto& line : stderr_tail) text += "\n    " + line;
    }
  }
  if (others > 0) text += "\n" + prefix + "stopping the other " + std::to_string(others) + " ranks";
  return text;
}

}  // namespace hvrun

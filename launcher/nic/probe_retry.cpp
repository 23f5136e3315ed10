#include "launcher/nic/probe_retry.hpp"

#include <map>
#include <set>
#include <string_view>

#include "common/duration_text.hpp"

namespace hvrun {

std::chrono::milliseconds attempt_timeout(std::chrono::milliseconds base, int attempt) {
  return base * (1 << (attempt - 1));
}

std::string attempts_text(std::chrono::milliseconds base, int attempts) {
  std::string timeouts;
  for (int a = 1; a <= attempts; ++a) timeouts += (a > 1 ? ", " : "") + seconds_text(attempt_timeout(base, a));
  return std::to_string(attempts) + (attempts == 1 ? " probe attempt (timeout " : " probe attempts (timeouts ") +
         timeouts + ")";
}

std::vector<std::pair<std::size_t, std::size_t>> probes_to_retry(const std::vector<ProbeTarget>& targets,
                                                                 const std::vector<ProbeResult>& results,
                                                                 const std::vector<HostSelection>& selections) {
  // Looked up by (host, address) rather than by scanning the targets per result: at 1,000 hosts there
  // are 5,000 targets and up to 20,000 timeouts, and the scan made the launcher's CPU grow as n².
  std::map<std::pair<std::size_t, std::string_view>, std::vector<std::size_t>> by_address;
  for (std::size_t t = 0; t < targets.size(); ++t) by_address[{targets[t].host, targets[t].address}].push_back(t);
  std::set<std::pair<std::size_t, std::size_t>> retry;  // each probe once, in (prober, target) order
  for (const ProbeResult& r : results) {
    const bool transient = r.outcome == ProbeOutcome::kTimeout || r.outcome == ProbeOutcome::kUnreachable;
    if (!transient || r.to >= selections.size() || selections[r.to].selected) continue;
    const auto it = by_address.find({r.to, r.address});
    if (it == by_address.end()) continue;
    for (const std::size_t t : it->second) retry.emplace(r.from, t);
  }
  return {retry.begin(), retry.end()};
}

}  // namespace hvrun

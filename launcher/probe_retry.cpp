#include "launcher/probe_retry.hpp"

#include "agent/wire/duration_text.hpp"

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
  std::vector<std::pair<std::size_t, std::size_t>> retry;
  for (const ProbeResult& r : results) {
    if (r.outcome != ProbeOutcome::kTimeout || r.to >= selections.size() || selections[r.to].selected) continue;
    for (std::size_t t = 0; t < targets.size(); ++t)
      if (targets[t].host == r.to && targets[t].address == r.address) retry.emplace_back(r.from, t);
  }
  return retry;
}

}  // namespace hvrun

#include "launcher/start/start_progress.hpp"

#include "common/duration_text.hpp"

namespace hvrun {

namespace {

std::string whole_seconds(std::chrono::milliseconds d) {
  return seconds_text(std::chrono::duration_cast<std::chrono::seconds>(d));
}

}  // namespace

std::string progress_text(const StartProgress& p) {
  const std::string total = "/" + std::to_string(p.hosts);
  std::string text = "hvrun: connected " + std::to_string(p.connected) + total + ", agents up " +
                     std::to_string(p.agents_up) + total;
  if (p.elapsed < kNamePendingAfter) return text;
  if (!p.in_shell.empty() && p.longest_shell >= kNamePendingAfter) {
    text += "; " + (p.in_shell.size() == 1 ? p.in_shell.front() + ": its login shell has"
                                           : std::to_string(p.in_shell.size()) + " hosts: their login shell has") +
            " run for " + whole_seconds(p.longest_shell) + " (a slow ~/.bashrc?)";
  }
  if (p.pending.empty()) return text;
  text += "; waiting for ";
  for (std::size_t i = 0; i < p.pending.size() && i < kPendingNamed; ++i) text += (i ? ", " : "") + p.pending[i];
  if (p.pending.size() > kPendingNamed) text += " (+" + std::to_string(p.pending.size() - kPendingNamed) + " more)";
  return text;
}

std::string shell_stuck_text(const std::string& host, std::chrono::milliseconds ran) {
  return host + ": its login shell has run for " + whole_seconds(ran) +
         " and hvrun-agent has not started; time it with: ssh " + host + " true";
}

}  // namespace hvrun

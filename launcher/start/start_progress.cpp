#include "launcher/start/start_progress.hpp"

namespace hvrun {

std::string progress_text(const StartProgress& p) {
  const std::string total = "/" + std::to_string(p.hosts);
  std::string text = "hvrun: connected " + std::to_string(p.connected) + total + ", agents up " +
                     std::to_string(p.agents_up) + total;
  if (p.elapsed < kNamePendingAfter || p.pending.empty()) return text;
  text += "; waiting for ";
  for (std::size_t i = 0; i < p.pending.size() && i < kPendingNamed; ++i) text += (i ? ", " : "") + p.pending[i];
  if (p.pending.size() > kPendingNamed) text += " (+" + std::to_string(p.pending.size() - kPendingNamed) + " more)";
  return text;
}

}  // namespace hvrun

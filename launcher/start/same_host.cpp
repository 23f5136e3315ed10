#include "launcher/start/same_host.hpp"

namespace hvrun {

std::optional<std::string> same_host_error(const std::vector<HostIdentity>& hosts) {
  for (std::size_t a = 0; a < hosts.size(); ++a) {
    if (hosts[a].network_stack.empty()) continue;
    for (std::size_t b = a + 1; b < hosts.size(); ++b) {
      if (hosts[b].network_stack != hosts[a].network_stack) continue;
      const std::string slots = std::to_string(hosts[a].slots + hosts[b].slots);
      return "hosts '" + hosts[a].name + "' and '" + hosts[b].name +
             "' are one machine (same kernel and network namespace); list it once with the slots added: -H " +
             hosts[a].name + ":" + slots + " (or '" + hosts[a].name + " slots=" + slots + "' in a hostfile)";
    }
  }
  return std::nullopt;
}

}  // namespace hvrun

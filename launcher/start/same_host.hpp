#pragma once
// One host under two names (`-H lab1,198.18.0.11`): agents that share one network stack (same kernel
// boot, same network namespace; network_stack.hpp) are one host to the network, and probing "between"
// them proves nothing. hvrun refuses such a host list before probing, naming both entries and the fix.
#include <optional>
#include <string>
#include <vector>

namespace hvrun {

struct HostIdentity {
  std::string name;           // as in -H or the hostfile
  int slots = 0;
  std::string network_stack;  // HelloMsg::network_stack; "" (unknown) matches nothing
};

// For the first two entries with the same network stack, one line: "hosts 'lab1' and '198.18.0.11' are
// one machine (same kernel and network namespace); list it once with the slots added: -H lab1:2 (or
// 'lab1 slots=2' in a hostfile)"; nullopt when every entry is a host of its own.
std::optional<std::string> same_host_error(const std::vector<HostIdentity>& hosts);

}  // namespace hvrun

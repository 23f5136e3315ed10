#pragma once
// Which hosts of a host list are this machine: `localhost`, loopback addresses, this machine's
// hostname, and names that resolve to one of this machine's addresses. Those run through a local
// agent over pipes; the rest go through SSH.
#include <chrono>
#include <string>
#include <vector>

namespace hvrun {

// Resolves all names at once (getaddrinfo_a), waiting at most `timeout` in total; a name that does
// not resolve in time is treated as remote, where SSH reports the failure with the host named.
std::vector<bool> find_local_hosts(const std::vector<std::string>& names, std::chrono::milliseconds timeout);

}  // namespace hvrun

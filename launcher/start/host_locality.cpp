#include "launcher/start/host_locality.hpp"

#include <netdb.h>

#include <set>

#include "common/interface_list.hpp"
#include "common/local_hostname.hpp"
#include "launcher/base/name_lookup.hpp"

namespace hvrun {

namespace {

// This machine's addresses, link-local ones without their scope (a resolved name carries none).
std::set<std::string> unscoped_own_addresses() {
  std::set<std::string> out;
  for (const std::string& a : own_addresses()) out.insert(a.substr(0, a.find('%')));
  return out;
}

bool is_loopback_name(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "::1" || name == "[::1]";
}

}  // namespace

std::vector<bool> find_local_hosts(const std::vector<std::string>& names, std::chrono::milliseconds timeout) {
  std::vector<bool> local(names.size(), false);
  const std::string self = local_hostname();

  // All names resolve at once, each waited for until the one deadline; one still resolving then is
  // left to the resolver (NameLookup).
  std::vector<std::pair<std::size_t, NameLookup>> lookups;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (is_loopback_name(names[i]) || names[i] == self)
      local[i] = true;
    else
      lookups.emplace_back(i, NameLookup(names[i], ""));
  }
  if (lookups.empty()) return local;
  const auto own = unscoped_own_addresses();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [i, lookup] : lookups) {
    const NameLookup::Result r = lookup.wait(deadline);
    for (const addrinfo* ai = r.addresses.get(); ai != nullptr; ai = ai->ai_next)
      if (own.count(address_text(ai->ai_addr)) != 0) local[i] = true;
  }
  return local;
}

}  // namespace hvrun

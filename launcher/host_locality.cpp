#include "launcher/host_locality.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "agent/wire/error.hpp"
#include "launcher/name_lookup.hpp"

namespace hvrun {

namespace {

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::set<std::string> own_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw_errno("getifaddrs", "finding this machine's addresses");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, &::freeifaddrs);
  std::set<std::string> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next)
    if (a->ifa_addr != nullptr && (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
      out.insert(address_text(a->ifa_addr));
  return out;
}

bool is_loopback_name(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "::1" || name == "[::1]";
}

}  // namespace

std::vector<bool> find_local_hosts(const std::vector<std::string>& names, std::chrono::milliseconds timeout) {
  std::vector<bool> local(names.size(), false);
  char self[256] = {};
  if (::gethostname(self, sizeof self - 1) != 0) throw_errno("gethostname");

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
  const auto own = own_addresses();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [i, lookup] : lookups) {
    const NameLookup::Result r = lookup.wait(deadline);
    for (const addrinfo* ai = r.addresses.get(); ai != nullptr; ai = ai->ai_next)
      if (own.count(address_text(ai->ai_addr)) != 0) local[i] = true;
  }
  return local;
}

}  // namespace hvrun

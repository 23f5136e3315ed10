#include "launcher/nic/probe_peers.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "launcher/nic/ip_subnet.hpp"

namespace hvrun {

namespace {

// FNV-1a over the host names, so that the random peers depend on the host list as well as the seed.
std::uint64_t mix(std::uint64_t seed, const std::vector<HostInventory>& hosts) {
  std::uint64_t h = 1469598103934665603ULL ^ seed;
  for (const HostInventory& host : hosts) {
    for (const char c : host.host) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    h = (h ^ 0xffU) * 1099511628211ULL;  // a separator: "ab","c" differs from "a","bc"
  }
  return h;
}

// The subnet ("10.0.0.0/24") of a target, from its host's inventory; "" when the prefix is unknown.
std::string subnet_of(const HostInventory& host, const ProbeTarget& t) {
  for (const InterfaceInfo& nic : host.interfaces) {
    if (nic.name != t.iface) continue;
    for (std::size_t i = 0; i < nic.addresses.size() && i < nic.prefix_lengths.size(); ++i)
      if (nic.addresses[i] == t.address)
        if (const auto s = IpSubnet::of(t.address, nic.prefix_lengths[i])) return s->text();
  }
  return {};
}

bool holds(const std::vector<std::size_t>& set, std::size_t x) { return std::find(set.begin(), set.end(), x) != set.end(); }

}  // namespace

std::size_t probe_peer_count(std::optional<int> flag, bool check_only) {
  if (flag) return static_cast<std::size_t>(std::max(*flag, 0));
  return check_only ? 0 : kDefaultProbePeers;
}

std::vector<std::vector<std::size_t>> choose_probe_peers(const std::vector<HostInventory>& hosts,
                                                         const std::vector<ProbeTarget>& targets, std::size_t peers,
                                                         std::uint64_t seed) {
  const std::size_t n = hosts.size();
  std::vector<std::vector<std::size_t>> probers(n);
  if (peers == 0 || n <= peers + 1) {
    for (std::size_t h = 0; h < n; ++h)
      for (std::size_t p = 0; p < n; ++p)
        if (p != h) probers[h].push_back(p);
    return probers;
  }
  std::mt19937_64 rng(mix(seed, hosts));
  for (std::size_t h = 0; h < n; ++h) {
    auto& set = probers[h];
    set.push_back((h + n - 1) % n);
    if (peers >= 2) set.push_back((h + 1) % n);
    // n > peers + 1, so enough distinct others exist and this ends.
    while (set.size() < peers) {
      const std::size_t p = (h + 1 + static_cast<std::size_t>(rng() % (n - 1))) % n;
      if (!holds(set, p)) set.push_back(p);
    }
  }
  // Subnet coverage: per subnet, the hosts with a target in it (ascending: targets are in host order).
  std::map<std::string, std::vector<std::size_t>> members;
  std::vector<std::vector<std::string>> subnets_of(n);
  for (const ProbeTarget& t : targets) {
    if (t.host >= n) continue;
    const std::string s = subnet_of(hosts[t.host], t);
    if (s.empty()) continue;
    auto& m = members[s];
    if (m.empty() || m.back() != t.host) m.push_back(t.host);
    auto& own = subnets_of[t.host];
    if (std::find(own.begin(), own.end(), s) == own.end()) own.push_back(s);
  }
  for (std::size_t h = 0; h < n; ++h) {
    for (const std::string& s : subnets_of[h]) {
      const auto& m = members[s];
      if (std::any_of(m.begin(), m.end(), [&](std::size_t x) { return x != h && holds(probers[h], x); })) continue;
      auto next = std::upper_bound(m.begin(), m.end(), h);  // the first member after h, wrapping
      if (next == m.end()) next = m.begin();
      if (*next != h) probers[h].push_back(*next);
    }
    std::sort(probers[h].begin(), probers[h].end());
  }
  return probers;
}

std::size_t probe_count(const std::vector<ProbeTarget>& targets, const std::vector<std::vector<std::size_t>>& probers) {
  std::size_t count = 0;
  for (const ProbeTarget& t : targets)
    if (t.host < probers.size()) count += probers[t.host].size();
  return count;
}

}  // namespace hvrun

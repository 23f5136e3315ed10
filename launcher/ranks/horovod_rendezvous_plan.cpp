#include "launcher/ranks/horovod_rendezvous_plan.hpp"

#include <arpa/inet.h>

#include <algorithm>

namespace hvrun {

namespace {

bool is_ipv4(const std::string& address) {
  in_addr parsed{};
  return ::inet_pton(AF_INET, address.c_str(), &parsed) == 1;
}

}  // namespace

std::optional<HorovodRendezvousPlan> plan_horovod_rendezvous(
    const std::string& rank0_iface, const std::string& rank0_address,
    const std::vector<InterfaceInfo>& rank0_interfaces, const std::vector<std::vector<InterfaceInfo>>& job_interfaces) {
  HorovodRendezvousPlan plan;
  if (is_ipv4(rank0_address)) {
    plan.address = rank0_address;
  } else {
    for (const auto& nic : rank0_interfaces) {
      if (nic.name != rank0_iface) continue;
      const auto v4 = std::find_if(nic.addresses.begin(), nic.addresses.end(), is_ipv4);
      if (v4 != nic.addresses.end()) plan.address = *v4;
    }
  }
  if (plan.address.empty()) return std::nullopt;
  // Every IPv4 address of every host: a rank's connection leaves from whichever one its kernel routes
  // by, which need not be its own chosen NIC's.
  for (const auto& host : job_interfaces)
    for (const auto& nic : host)
      for (const auto& a : nic.addresses)
        if (is_ipv4(a)) plan.allowed_peers.push_back(a);
  std::sort(plan.allowed_peers.begin(), plan.allowed_peers.end());
  plan.allowed_peers.erase(std::unique(plan.allowed_peers.begin(), plan.allowed_peers.end()), plan.allowed_peers.end());
  return plan;
}

}  // namespace hvrun

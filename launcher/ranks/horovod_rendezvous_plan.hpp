#pragma once
// Where Horovod's Gloo rendezvous is served and whom it answers, from the NIC choice: on rank 0's
// host, at an IPv4 address of the NIC chosen there (Horovod's client speaks IPv4 only), answering the
// IPv4 addresses of every host of the job. The server itself: common/horovod_rendezvous.hpp.
#include <optional>
#include <string>
#include <vector>

#include "common/interface_list.hpp"

namespace hvrun {

struct HorovodRendezvousPlan {
  std::string address;                     // where ranks reach it (HOROVOD_GLOO_RENDEZVOUS_ADDR)
  std::vector<std::string> allowed_peers;  // sorted, without duplicates
};

// `rank0_iface`/`rank0_address`: the NIC chosen on rank 0's host; `rank0_interfaces`: that host's
// interfaces; `job_interfaces`: every host's. The chosen address when it is IPv4, else the NIC's first
// IPv4 address; nothing when that NIC has none (the caller says what that means for the user).
std::optional<HorovodRendezvousPlan> plan_horovod_rendezvous(
    const std::string& rank0_iface, const std::string& rank0_address,
    const std::vector<InterfaceInfo>& rank0_interfaces, const std::vector<std::vector<InterfaceInfo>>& job_interfaces);

}  // namespace hvrun

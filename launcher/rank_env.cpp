#include "launcher/rank_env.hpp"

#include "agent/wire/error.hpp"

namespace hvrun {

std::map<std::string, std::string> rank_environment(const RankInfo& rank, const JobNetwork& net) {
  if (rank.host_index < 0 || static_cast<std::size_t>(rank.host_index) >= net.hosts.size()) {
    throw Error("rank " + std::to_string(rank.rank) + ": no network facts for host index " +
                std::to_string(rank.host_index));
  }
  const HostNetwork& host = net.hosts[static_cast<std::size_t>(rank.host_index)];
  const auto str = [](int v) { return std::to_string(v); };

  std::map<std::string, std::string> env{
      {"HVRUN_RANK", str(rank.rank)},
      {"HVRUN_SIZE", str(rank.size)},
      {"HVRUN_LOCAL_RANK", str(rank.local_rank)},
      {"HVRUN_LOCAL_SIZE", str(rank.local_size)},
      {"HVRUN_CROSS_RANK", str(rank.cross_rank)},
      {"HVRUN_CROSS_SIZE", str(rank.cross_size)},
      {"HVRUN_HOSTNAME", host.hostname},
      {"HVRUN_IFACE", host.iface},
      {"HVRUN_ADDR", host.address},
      // "=name" is NCCL's exact match; a bare "eth1" would also match eth10.
      {"NCCL_SOCKET_IFNAME", "=" + host.iface},
      {"GLOO_SOCKET_IFNAME", host.iface},
      {"HOROVOD_RANK", str(rank.rank)},
      {"HOROVOD_SIZE", str(rank.size)},
      {"HOROVOD_LOCAL_RANK", str(rank.local_rank)},
      {"HOROVOD_LOCAL_SIZE", str(rank.local_size)},
      {"HOROVOD_CROSS_RANK", str(rank.cross_rank)},
      {"HOROVOD_CROSS_SIZE", str(rank.cross_size)},
      {"HOROVOD_HOSTNAME", host.hostname},
      {"HOROVOD_GLOO_IFACE", host.iface},
      // horovodrun's Gloo mode: both are needed when Horovod was also built with MPI (its default then).
      {"HOROVOD_CONTROLLER", "gloo"},
      {"HOROVOD_CPU_OPERATIONS", "gloo"},
      // A Python rank's output must come as it is printed, not when the rank exits (horovodrun's too).
      {"PYTHONUNBUFFERED", "1"},
      // torch's env:// rendezvous; GROUP_RANK is the node's index, not Horovod's cross rank.
      {"RANK", str(rank.rank)},
      {"WORLD_SIZE", str(rank.size)},
      {"LOCAL_RANK", str(rank.local_rank)},
      {"LOCAL_WORLD_SIZE", str(rank.local_size)},
      {"GROUP_RANK", str(rank.node_rank)},
      {"MASTER_ADDR", net.master_addr},
      {"MASTER_PORT", str(net.master_port)},
  };
  if (!net.store_addr.empty()) {
    env["HVRUN_STORE_ADDR"] = net.store_addr;
    env["HVRUN_STORE_PORT"] = str(net.store_port);
    env["HVRUN_STORE_TOKEN"] = net.store_token;
  }
  if (!net.horovod_rendezvous_addr.empty()) {
    env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] = net.horovod_rendezvous_addr;
    env["HOROVOD_GLOO_RENDEZVOUS_PORT"] = str(net.horovod_rendezvous_port);
  }
  return env;
}

}  // namespace hvrun

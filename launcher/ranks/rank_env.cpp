#include "launcher/ranks/rank_env.hpp"

#include <unistd.h>

#include "common/error.hpp"
#include "common/local_hostname.hpp"
#include "common/rank_contract_names.hpp"

namespace hvrun {

std::map<std::string, std::string> rank_environment(const RankInfo& rank, const JobNetwork& net) {
  if (rank.host_index < 0 || static_cast<std::size_t>(rank.host_index) >= net.hosts.size()) {
    throw Error("rank " + std::to_string(rank.rank) + ": no network facts for host index " +
                std::to_string(rank.host_index));
  }
  const HostNetwork& host = net.hosts[static_cast<std::size_t>(rank.host_index)];
  const auto str = [](int v) { return std::to_string(v); };
  using namespace rank_contract;

  std::map<std::string, std::string> env{
      {kRank, str(rank.rank)},
      {kSize, str(rank.size)},
      {kLocalRank, str(rank.local_rank)},
      {kLocalSize, str(rank.local_size)},
      {kCrossRank, str(rank.cross_rank)},
      {kCrossSize, str(rank.cross_size)},
      {kHostname, host.hostname},
      {kIface, host.iface},
      {kAddr, host.address},
      // "=name" is NCCL's exact match; a bare "eth1" would also match eth10.
      {kNcclSocketIfname, "=" + host.iface},
      {kGlooSocketIfname, host.iface},
      {kHorovodRank, str(rank.rank)},
      {kHorovodSize, str(rank.size)},
      {kHorovodLocalRank, str(rank.local_rank)},
      {kHorovodLocalSize, str(rank.local_size)},
      {kHorovodCrossRank, str(rank.cross_rank)},
      {kHorovodCrossSize, str(rank.cross_size)},
      {kHorovodHostname, host.hostname},
      {kHorovodGlooIface, host.iface},
      // horovodrun's Gloo mode: both are needed when Horovod was also built with MPI (its default then).
      {"HOROVOD_CONTROLLER", "gloo"},
      {"HOROVOD_CPU_OPERATIONS", "gloo"},
      // A Python rank's output must come as it is printed, not when the rank exits (horovodrun's too).
      {"PYTHONUNBUFFERED", "1"},
      // A Python rank that crashes shows its Python frames (faulthandler); -x PYTHONFAULTHANDLER= turns it off.
      {"PYTHONFAULTHANDLER", "1"},
      // torch's env:// rendezvous; GROUP_RANK is the node's index, not Horovod's cross rank.
      {kTorchRank, str(rank.rank)},
      {kTorchWorldSize, str(rank.size)},
      {kTorchLocalRank, str(rank.local_rank)},
      {kTorchLocalWorldSize, str(rank.local_size)},
      {kTorchGroupRank, str(rank.node_rank)},
      {kTorchGroupWorldSize, str(rank.node_count)},
      {kTorchRoleRank, str(rank.rank)},
      {kTorchRoleWorldSize, str(rank.size)},
      {kTorchRoleName, net.role},
      {kTorchRestartCount, str(net.restarts.count)},
      {kTorchMaxRestarts, str(net.restarts.max)},
      {kTorchRunId, net.restarts.run_id},
      {kMasterAddr, net.master_addr},
      {kMasterPort, str(net.master_port)},
  };
  if (net.store_addr) {
    env[kStoreAddr] = *net.store_addr;
    env[kStorePort] = str(net.store_port);
    env[kStoreToken] = net.store_token;
  }
  if (net.horovod_rendezvous_addr) {
    env[kHorovodGlooRendezvousAddr] = *net.horovod_rendezvous_addr;
    env[kHorovodGlooRendezvousPort] = str(net.horovod_rendezvous_port);
  }
  if (net.omp_threads_unset && rank.local_size > 1) env[kOmpNumThreads] = "1";
  return env;
}

std::string job_run_id(const LaunchOptions& options) {
  if (!options.run_id.empty()) return options.run_id;
  return "hvrun-" + local_hostname() + "-" + std::to_string(::getpid());
}

std::string omp_threads_notice(const RankPlan& plan, const JobNetwork& net) {
  if (!net.omp_threads_unset) return {};
  for (const HostPlan& h : plan.hosts())
    if (h.local_size > 1)
      return "OMP_NUM_THREADS=1 for each rank on a host that runs more than one, as torchrun sets it, so that "
             "they do not overload the host; tune it with -x OMP_NUM_THREADS=N";
  return {};
}

}  // namespace hvrun

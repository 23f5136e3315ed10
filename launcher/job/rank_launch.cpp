#include "launcher/job/rank_launch.hpp"

#include <unistd.h>

#include <cstring>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/rank_contract_names.hpp"
#include "launcher/nic/nic_selector.hpp"
#include "launcher/ranks/mpirun_process.hpp"
#include "launcher/ranks/user_env.hpp"

namespace hvrun {

std::size_t rank0_host(const std::vector<JobHost>& hosts, const RankPlan& plan) {
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const HostPlan& hp = plan.hosts()[hosts[i].plan_index];
    if (hp.first_rank == 0 && hp.local_size > 0) return i;
  }
  return 0;
}

JobNetwork job_network(const std::vector<JobHost>& hosts, const RankPlan& plan, const ProbeRound& round,
                       const JobServices& services) {
  JobNetwork net;
  net.hosts.resize(plan.hosts().size());
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    HostNetwork& n = net.hosts[hosts[i].plan_index];
    n.hostname = hosts[i].hello->hostname;
    const NicChoice c = *round.choice_of(i);
    n.iface = c.iface;
    n.address = c.address;
  }
  const JobHost& first = hosts.at(services.rank0_host);
  net.master_addr = net.hosts[first.plan_index].address;
  net.master_port = first.master_port;
  // The store is served by rank 0's agent, on every address; ranks use the verified one.
  net.store_addr = net.master_addr;
  net.store_port = first.store_port;
  net.store_token = services.store_token;
  net.horovod_rendezvous_addr = services.horovod_rendezvous_addr;
  net.horovod_rendezvous_port = services.horovod_rendezvous_port;
  net.restarts = services.restarts;
  net.role = services.role;
  net.omp_threads_unset = services.omp_threads_unset;
  return net;
}

LaunchMsg launch_message(const JobHost& h, const RankPlan& plan, const JobNetwork& net, const EnvPolicy& env,
                         const LaunchOptions& options, const std::string& cwd) {
  const HostPlan& hp = plan.hosts()[h.plan_index];
  LaunchMsg m{cwd, options.command, h.is_local ? env.local() : env.remote(), {}};
  // A torchrun-started program reads this as "a torchelastic agent serves a store": none does here.
  m.env.erase(rank_contract::kTorchUseAgentStore);
  for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r) {
    auto rank_env = rank_environment(plan.rank(r), net);
    apply_user_variables(rank_env, env.user());
    m.ranks.push_back(RankLaunch{r, std::move(rank_env)});
  }
  return m;
}

void warn_about_user_environment(const EnvPolicy& env, const ProbeRound& round) {
  for (const std::string& name : env.unset())
    spdlog::warn("-x {}: not set in hvrun's environment, so not passed to the ranks", name);
  std::vector<std::string> names;
  for (const HostInventory& inv : round.inventories()) names.push_back(inv.host);
  if (const std::string line = user_nic_contradictions(env.user(), names, round.selections()); !line.empty())
    spdlog::warn("{}", line);
}

std::string current_directory() {
  std::string buf(4096, '\0');
  if (::getcwd(buf.data(), buf.size()) == nullptr) throw_errno("getcwd", "the working directory for the ranks");
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

std::string mpi_marker_for(const LaunchOptions& options, const JobSecret& secret) {
  if (!options.mpi || options.dry_run || options.check_only || options.no_straggler_watch || options.command.empty())
    return "";
  return hex_encode(secret.mac("hvrun mpi marker")).substr(0, 24);
}

MpirunInput mpirun_input_for(const std::vector<JobHost>& hosts, const RankPlan& plan, const ProbeRound& round,
                             const LaunchOptions& options, const std::string& marker) {
  MpirunInput in = mpirun_input(options);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const NicChoice c = *round.choice_of(i);
    in.hosts.push_back({hosts[i].name, plan.hosts()[hosts[i].plan_index].local_size, c.iface, c.address,
                        marker.empty() ? "" : hosts[i].rank_library, marker.empty() ? "" : hosts[i].rank_stack_dir});
  }
  in.marker = marker;
  in.shared_subnet = shared_ipv4_subnet(round.inventories(), round.selections());
  in.known_hosts = known_hosts_for_mpirun();
  in.forwarded = EnvPolicy(launcher_environment(), options).forwarded_names();
  return in;
}

}  // namespace hvrun

#include "launcher/ranks/dry_run.hpp"

#include "common/rank_contract_names.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/ranks/rank_env.hpp"
#include "launcher/ranks/user_env.hpp"

namespace hvrun {

void print_dry_run(std::ostream& out, const RankPlan& plan, const LaunchOptions& options,
                   const Environment& launcher_env) {
  out << "# hvrun dry run: " << plan.size() << " ranks on " << plan.hosts().size() << " hosts\n";
  JobNetwork net;
  for (const auto& hp : plan.hosts()) {
    out << "# host " << hp.host << ": slots " << hp.slots;
    if (hp.local_size > 0)
      out << ", ranks " << hp.first_rank << "-" << hp.first_rank + hp.local_size - 1 << "\n";
    else
      out << ", no ranks\n";
    net.hosts.push_back(HostNetwork{hp.host, "<chosen at launch>", "<chosen at launch>"});
  }
  net.master_addr = "<rank 0's host's address>";
  net.horovod_rendezvous_addr = net.master_addr;
  // The first attempt's view (each restart raises TORCHELASTIC_RESTART_COUNT by one).
  net.restarts = JobNetwork::Restarts{
      0, options.max_restarts, options.run_id.empty() ? "hvrun-<the launcher's hostname>-<its pid>" : options.run_id};
  net.role = options.role;
  net.omp_threads_unset =
      options.torchrun_form && EnvPolicy(launcher_env, options).local().count(rank_contract::kOmpNumThreads) == 0;
  out << "# command:";
  for (const auto& a : options.command) out << ' ' << a;
  out << "\n";
  const auto user = user_variables(options.env, launcher_env);
  for (int r = 0; r < plan.size(); ++r) {
    auto rank_env = rank_environment(plan.rank(r), net);
    apply_user_variables(rank_env, user);
    for (const auto& [k, v] : rank_env) {
      // The ports are picked by rank 0's agent at launch, unless -x sets them.
      const bool port_picked_later = (k == "MASTER_PORT" || k == "HOROVOD_GLOO_RENDEZVOUS_PORT") && !user.count(k);
      out << '[' << r << "] " << k << '=' << (port_picked_later ? "<free port picked at launch>" : v) << "\n";
    }
  }
  for (const auto& [name, value] : options.horovod_env) out << "# " << name << '=' << value << " (horovodrun's flags)\n";
  for (const auto& [name, value] : options.env)
    out << "# -x " << name << (value ? "=" + *value : std::string(" (from hvrun's environment)")) << "\n";
}

}  // namespace hvrun

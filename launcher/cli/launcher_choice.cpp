#include "launcher/cli/launcher_choice.hpp"

#include "common/error.hpp"

namespace hvrun {

namespace {

bool is_loopback_name(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "::1";
}

// The first host that srun cannot start an agent on, or nothing.
std::optional<std::string> host_outside(const SlurmAllocation& allocation, const std::vector<HostSpec>& hosts) {
  for (const HostSpec& h : hosts)
    if (!allocation.has_node(h.name) && !is_loopback_name(h.name)) return h.name;
  return std::nullopt;
}

}  // namespace

AgentLauncher choose_launcher(const std::string& requested, bool rsh_agent_given,
                              const std::optional<SlurmAllocation>& allocation, const std::vector<HostSpec>& hosts) {
  if (requested == "rsh" || (requested == "auto" && rsh_agent_given)) {
    if (!rsh_agent_given) throw UsageError("--launcher rsh needs --rsh-agent CMD (e.g. --rsh-agent 'docker exec -i')");
    return AgentLauncher::kRsh;
  }
  if (rsh_agent_given)
    throw UsageError("--rsh-agent and --launcher " + requested + " exclude each other; drop one of them");
  if (requested == "ssh") return AgentLauncher::kSsh;
  if (requested == "slurm") {
    if (!allocation)
      throw UsageError("--launcher slurm: not inside a Slurm allocation (SLURM_JOB_NODELIST is unset); run hvrun "
                       "under salloc or sbatch, or use --launcher ssh");
    if (const auto outside = host_outside(*allocation, hosts))
      throw UsageError("--launcher slurm: host '" + *outside + "' is not a node of Slurm job " + allocation->job_id +
                       "; srun starts agents only there (use --launcher ssh for other hosts)");
    return AgentLauncher::kSlurm;
  }
  if (requested != "auto") throw UsageError("--launcher: '" + requested + "' is not one of auto, ssh, slurm, rsh");
  return allocation && !host_outside(*allocation, hosts) ? AgentLauncher::kSlurm : AgentLauncher::kSsh;
}

std::string launcher_name(AgentLauncher launcher) {
  switch (launcher) {
    case AgentLauncher::kSsh: return "ssh";
    case AgentLauncher::kRsh: return "rsh";
    case AgentLauncher::kSlurm: return "slurm";
  }
  return "ssh";
}

}  // namespace hvrun

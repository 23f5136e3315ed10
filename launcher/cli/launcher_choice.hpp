#pragma once
// Which way the agents of other hosts are started (--launcher auto|ssh|slurm|rsh), decided once the
// command line and the environment are known.
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/host_list.hpp"
#include "launcher/cli/slurm_allocation.hpp"

namespace hvrun {

enum class AgentLauncher {
  kSsh,    // hvrun's own SSH sessions (libssh)
  kRsh,    // --rsh-agent CMD: `CMD HOST /bin/sh`, the agent check script on its stdin
  kSlurm,  // srun, one step per node of the allocation hvrun runs in
};

// `requested` is --launcher's value (auto, ssh, slurm, rsh). auto: rsh when --rsh-agent is given,
// else slurm inside an allocation when every host is one of its nodes (or a loopback name, which runs
// here anyway), else ssh. Throws UsageError for contradictions: rsh without --rsh-agent, --rsh-agent
// with ssh or slurm, slurm outside an allocation or with a host that is not one of its nodes.
AgentLauncher choose_launcher(const std::string& requested, bool rsh_agent_given,
                              const std::optional<SlurmAllocation>& allocation, const std::vector<HostSpec>& hosts);

// "ssh", "rsh", "slurm": as --launcher spells it.
std::string launcher_name(AgentLauncher launcher);

}  // namespace hvrun

#include "launcher/cli/slurm_allocation.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "common/error.hpp"
#include "launcher/cli/slurm_host_list.hpp"

namespace hvrun {

int SlurmAllocation::tasks() const {
  long total = 0;
  for (const auto& n : nodes) total += n.slots;
  return static_cast<int>(std::min<long>(total, std::numeric_limits<int>::max()));
}

bool SlurmAllocation::has_node(const std::string& name) const {
  return std::any_of(nodes.begin(), nodes.end(), [&](const HostSpec& n) { return n.name == name; });
}

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::optional<SlurmAllocation> slurm_allocation(const EnvLookup& env) {
  std::string nodes_var = "SLURM_JOB_NODELIST";
  auto nodes = env(nodes_var);
  if (!nodes) nodes = env(nodes_var = "SLURM_NODELIST");
  if (!nodes) return std::nullopt;
  SlurmAllocation a;
  a.job_id = env("SLURM_JOB_ID").value_or("");
  const auto names = expand_slurm_host_list(*nodes, nodes_var);
  std::vector<int> tasks(names.size(), 1);
  if (const auto per_node = env("SLURM_TASKS_PER_NODE")) {
    tasks = expand_slurm_counts(*per_node, "SLURM_TASKS_PER_NODE");
    if (tasks.size() != names.size())
      throw UsageError("SLURM_TASKS_PER_NODE '" + *per_node + "' gives " + std::to_string(tasks.size()) +
                       " nodes but " + nodes_var + " '" + *nodes + "' has " + std::to_string(names.size()) +
                       "; give the hosts with -H instead");
  }
  for (std::size_t i = 0; i < names.size(); ++i) a.nodes.push_back(HostSpec{names[i], tasks[i]});
  return a;
}

}  // namespace hvrun

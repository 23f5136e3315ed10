#pragma once
// The Slurm allocation hvrun runs in (under salloc or sbatch), read from the environment Slurm sets:
// its nodes (SLURM_JOB_NODELIST) and the tasks on each (SLURM_TASKS_PER_NODE).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/host_list.hpp"

namespace hvrun {

struct SlurmAllocation {
  std::string job_id;           // SLURM_JOB_ID, for messages ("" when unset)
  std::vector<HostSpec> nodes;  // in Slurm's order; slots = the node's tasks
  int tasks() const;
  bool has_node(const std::string& name) const;
};

// Looks a variable up; nothing when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();

// The allocation, or nothing outside one (SLURM_JOB_NODELIST, or the older SLURM_NODELIST, unset).
// Without SLURM_TASKS_PER_NODE every node has one slot. Throws UsageError naming the variable when a
// list is malformed or the two lists disagree on the number of nodes.
std::optional<SlurmAllocation> slurm_allocation(const EnvLookup& env);

}  // namespace hvrun

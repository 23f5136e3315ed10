#pragma once
// --dry-run without --mpi: what a launch would do, printed without starting anything: the plan (which
// ranks on which host), the command, each rank's contract with -x applied, and the environment flags.
// What only the launch knows (the NICs, rank 0's address, the free ports) is shown as a placeholder.
#include <ostream>

#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/ranks/env_policy.hpp"

namespace hvrun {

// Writes the dry run of `plan` and `options` to `out`; `launcher_env` gives the values of bare -x names.
void print_dry_run(std::ostream& out, const RankPlan& plan, const LaunchOptions& options,
                   const Environment& launcher_env);

}  // namespace hvrun

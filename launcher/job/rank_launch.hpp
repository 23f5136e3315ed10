#pragma once
// What the ranks are started with once every host has its NIC: the job's network for the rank
// contract and each host's LaunchMsg (the agents start the ranks), or mpirun's input (--mpi).
#include <optional>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "common/job_secret.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/nic/probe_round.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/ranks/mpirun_command.hpp"
#include "launcher/ranks/rank_env.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

// Where the job's shared services are: rank 0's host (`rank0_host`, the job's index), the store's
// token, and Horovod's rendezvous (no address when not served).
struct JobServices {
  std::size_t rank0_host = 0;
  std::string store_token;
  std::optional<std::string> horovod_rendezvous_addr;
  int horovod_rendezvous_port = 0;
  JobNetwork::Restarts restarts;  // this attempt, of --max-restarts, in the run
  std::string role;               // --role
  bool omp_threads_unset = false;  // the ranks' environment has no OMP_NUM_THREADS
};

// The host (the job's index) that runs rank 0 in `plan` (it serves the store and Horovod's rendezvous);
// 0 when none does.
std::size_t rank0_host(const std::vector<JobHost>& hosts, const RankPlan& plan);
// How many of `plan`'s ranks `host` runs.
inline int ranks_on(const JobHost& host, const RankPlan& plan) { return plan.hosts()[host.plan_index].local_size; }

// Each host's rank contract carries its own host's chosen NIC. Every host has an agent and a NIC.
JobNetwork job_network(const std::vector<JobHost>& hosts, const RankPlan& plan, const ProbeRound& round,
                       const JobServices& services);
// The LaunchMsg for `host`: its ranks, each with the rank contract under the user's -x (which wins,
// README "The rank environment"), in `cwd`.
LaunchMsg launch_message(const JobHost& host, const RankPlan& plan, const JobNetwork& net, const EnvPolicy& env,
                         const LaunchOptions& options, const std::string& cwd);
// The launch's warnings about the user's environment: each -x name hvrun's environment lacks, and -x
// settings that contradict the chosen NICs (user_env.hpp).
void warn_about_user_environment(const EnvPolicy& env, const ProbeRound& round);
// hvrun's working directory, where the ranks start.
std::string current_directory();
// --mpi: mpirun's input for the chosen NICs, in the job's host order.
// --mpi, when hvrun runs mpirun and observes the ranks: the marker their environment carries
// (HVRUN_MPI_MARKER), derived from the job's secret (so per job, and revealing nothing of it); "" when the
// ranks are not observed (--no-straggler-watch, --dry-run, --check-only, no --mpi).
std::string mpi_marker_for(const LaunchOptions& options, const JobSecret& secret);

// `marker`: mpi_marker_for's; with one, each host's ranks get its crash handler (JobHost::rank_library).
MpirunInput mpirun_input_for(const std::vector<JobHost>& hosts, const RankPlan& plan, const ProbeRound& round,
                             const LaunchOptions& options, const std::string& marker = {});

}  // namespace hvrun

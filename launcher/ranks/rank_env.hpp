#pragma once
// The rank contract: the environment every rank gets on top of the launcher's (see README).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"

namespace hvrun {

// What the launcher learned about a host's network by the time ranks start.
struct HostNetwork {
  std::string hostname;   // the host's own name (gethostname on that host)
  std::string iface;      // selected NIC ("lo" on a single host)
  std::string address;    // its address
};

struct JobNetwork {
  std::vector<HostNetwork> hosts;  // parallel to RankPlan::hosts()
  std::string master_addr;         // rank 0's host's selected address
  int master_port = 0;             // a port free on rank 0's host
  std::optional<std::string> store_addr;  // rendezvous store (nothing until it exists)
  int store_port = 0;
  std::string store_token;
  std::optional<std::string> horovod_rendezvous_addr;  // Horovod's Gloo rendezvous (nothing until it exists)
  int horovod_rendezvous_port = 0;
  // torchrun's run, in every job: which attempt this is (0 for the first) of how many restarts
  // (--max-restarts; 0 without), in which run (TORCHELASTIC_RUN_ID).
  struct Restarts {
    int count = 0;
    int max = 0;
    std::string run_id;
  };
  Restarts restarts;
  std::string role = "default";     // ROLE_NAME (--role)
  bool omp_threads_unset = false;   // the ranks' environment sets no OMP_NUM_THREADS (nor does -x)
};

// The contract variables for one rank: HVRUN_*, HOROVOD_*, NCCL/GLOO_SOCKET_IFNAME, torchrun's whole
// environment (env:// with MASTER_*, GROUP_*, ROLE_*, TORCHELASTIC_*; one role, so ROLE_RANK is RANK),
// and what horovodrun's Gloo mode gives besides (HOROVOD_CONTROLLER/CPU_OPERATIONS=gloo,
// PYTHONUNBUFFERED=1). HVRUN_STORE_ADDR/PORT/TOKEN appear only once net.store_addr is set,
// HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT once net.horovod_rendezvous_addr is. GROUP_RANK is rank.node_rank.
// OMP_NUM_THREADS=1 as torchrun sets it: for a rank that shares its host, when net.omp_threads_unset.
// Throws Error when net.hosts has no entry for rank.host_index.
std::map<std::string, std::string> rank_environment(const RankInfo& rank, const JobNetwork& net);

// TORCHELASTIC_RUN_ID: --rdzv-id, else this launcher's run, hvrun-HOST-PID (the same in every attempt).
std::string job_run_id(const LaunchOptions& options);

// torchrun's one-line notice when `plan` gives some rank OMP_NUM_THREADS=1 under `net`; "" when none.
std::string omp_threads_notice(const RankPlan& plan, const JobNetwork& net);

}  // namespace hvrun

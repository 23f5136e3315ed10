#pragma once
// Everything `hvrun` was asked to do, parsed and validated from its command line.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "launcher/cli/host_list.hpp"
#include "launcher/cli/launcher_choice.hpp"
#include "launcher/output/rank_logs.hpp"

namespace hvrun {

// torchrun's --nproc-per-node gpu, cpu and auto (launcher/cli/device_count.hpp); kNone: a number, or none.
enum class PerHostCount { kNone, kGpu, kCpu, kAuto };

struct LaunchOptions {
  int np = 0;                        // 0: all slots
  std::vector<HostSpec> hosts;       // from -H (repeatable, lists joined) or --hostfile; default: the
                                     // Slurm allocation's nodes and tasks (launcher/cli/slurm_allocation.hpp),
                                     // else localhost with np slots (1 without -np)
  bool no_oversubscribe = false;
  bool oversubscribe = false;        // --oversubscribe (mpirun's): -np above the slots without a warning
  bool allow_run_as_root = false;    // --allow-run-as-root (mpirun's): hvrun needs none; passed on with --mpi
  std::optional<int> ssh_port;       // -p: overrides ~/.ssh/config for every host
  std::string ssh_identity_file;     // -i
  std::chrono::milliseconds ssh_connect_timeout{10'000};  // --ssh-connect-timeout
  bool ssh_strict_host_key = false;  // --ssh-strict-host-key-checking: refuse hosts not in known_hosts
  // --connect-concurrency: hosts whose agents start at once (launcher/start/connector.hpp). Enough to hide
  // the network's latency behind the launcher's CPU (an SSH start costs 5-25 ms of it and takes
  // 0.1-0.4 s), few enough that the `ssh -G` runs and handshakes of a big launch do not outlast
  // --ssh-connect-timeout on a busy machine (256 at once outlast it on a loaded 2-core launcher,
  // docs/DESIGN.md section 2.1). Open MPI's rsh launcher: 128.
  int connect_concurrency = 64;
  std::string agent_path;            // --agent-path: hvrun-agent's path on every remote host
  std::string rsh_agent;             // --rsh-agent CMD: start remote agents as `CMD HOST /bin/sh`, not over SSH
  AgentLauncher launcher = AgentLauncher::kSsh;  // --launcher, with auto decided (launcher_choice.hpp)
  // --network-interface: one value per occurrence, as typed (comma lists unsplit: a leading '^' or '='
  // marks a whole list); syntax checked by NicFilter::parse, which turns them into the filter.
  std::vector<std::string> network_interfaces;
  std::chrono::milliseconds start_timeout{30'000};
  std::chrono::milliseconds kill_grace{3'000};
  std::chrono::milliseconds heartbeat_timeout{20'000};  // --heartbeat-timeout
  std::chrono::milliseconds stall_timeout{0};            // --stall-timeout; 0: off
  // --max-restarts (torchrun's): how many times in all the job may stop every rank and start them
  // again after a rank fails or a host is lost (launcher/job/restart_plan.hpp); 0: the first failure
  // ends the job. --min-np (horovodrun's name): with restarts, the fewest ranks an attempt may run with
  // when hosts are lost; 0: every attempt runs -np ranks.
  int max_restarts = 0;
  int min_np = 0;
  // torchrun's --rdzv-id and --role (launcher/cli/torchrun_flags.hpp): TORCHELASTIC_RUN_ID (empty: hvrun
  // makes one, hvrun-HOST-PID) and ROLE_NAME.
  std::string run_id;
  std::string role = "default";
  // torchrun's form (any of its options but --max-restarts and the log options): its interpreter rule
  // was applied to `command`, and ranks sharing a host get OMP_NUM_THREADS=1 unless it is set.
  bool torchrun_form = false;
  // --nproc-per-node gpu|cpu|auto: every host's slots are its own count, learnt from the hosts before
  // the plan is made (launcher/start/device_census.hpp, which then sets kNone); until then each host has
  // 1 slot and np is 0. counted_min_hosts: --nnodes MIN:MAX's MIN under --max-restarts, whose floor
  // (min_np) waits for the counts.
  PerHostCount per_host_count = PerHostCount::kNone;
  int counted_min_hosts = 0;
  // Horovod elastic (horovodrun's --host-discovery-script, or --min-np without --max-restarts;
  // launcher/job/elastic_job.hpp): the workers stay up and re-initialise when hosts come and go.
  struct Elastic {
    int min_np = 0;                     // --min-np, else -np
    std::optional<int> max_np;          // --max-np; none: unbounded, horovodrun's real default
    std::optional<int> slots_per_host;  // --slots-per-host: for discovery lines without ":SLOTS"
    std::string discovery_script;       // --host-discovery-script; empty: the -H hosts, fixed
    std::chrono::seconds timeout{600};  // --elastic-timeout: waiting for --min-np slots
    std::optional<int> reset_limit;     // --reset-limit; none: unlimited
    std::optional<std::pair<int, int>> cooldown;  // --blacklist-cooldown-range; none: blacklisted for good
  };
  std::optional<Elastic> elastic;
  // -x VAR (nullopt: pass the launcher's value) or VAR=VALUE (VALUE may be empty or hold '=')
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::string output_filename;       // --output-filename DIR
  // torchrun's --log-dir, --redirects, --tee, --local-ranks-filter (torchrun_flags.hpp), hvrun's
  // --ranks-filter and --prefix-output-with-hostname: launcher/output/rank_logs.hpp.
  RankLogOptions logs;
  bool prefix_timestamp = false;
  bool verbose = false;
  // hvrun's own threshold, from --hvrun-log-level and --verbose (choose_log_level, launcher/cli/log_choice.hpp).
  // (--log-level is horovodrun's: HOROVOD_LOG_LEVEL for the ranks, in horovod_env.)
  LogLevel log_level = LogLevel::warn;
  // --hvrun-log-subsys: the subsystems whose debug and trace lines print (common/log.hpp); default all.
  LogSubsysSet log_subsys = all_log_subsystems();
  bool dry_run = false;
  bool check_only = false;
  bool json = false;                 // --json: --check-only prints JSON
  bool matrix = false;               // --matrix: --check-only draws who reaches whom
  std::string report_file;           // --report FILE: --check-only also writes an HTML page there
  std::string events_file;           // --events FILE: every job event and observation as JSON lines
  bool no_straggler_watch = false;   // --no-straggler-watch: the agents do not observe the ranks
  bool rank_table = false;           // --rank-table (or --verbose): the ranks' table at the end
  std::chrono::milliseconds probe_timeout{1'000};  // --probe-timeout: bounds one probe
  // --probe-peers K: how many peers probe each host's NICs (0: all pairs); unset: probe_peer_count's
  // default (all pairs under --check-only, kDefaultProbePeers for a launch; launcher/nic/probe_peers.hpp).
  std::optional<int> probe_peers;
  // --no-link-test: skip measuring each chosen NIC's link to its ring neighbour before the first rank
  // starts (launcher/job/link_test_run.hpp).
  bool link_test = true;
  // --disable-cache (horovodrun's), or HVRUN_DISABLE_CACHE=1: probe every launch instead of reusing a
  // choice of the last 60 minutes on the same hosts, NICs and flags (launcher/nic/nic_cache.hpp).
  bool disable_cache = false;
  std::vector<std::string> command;  // argv of each rank
  // --sync DIR (repeatable): made the same on every host before the ranks start (launcher/start/
  // sync_manifest.hpp), at most --sync-limit bytes in all.
  std::vector<std::string> sync_dirs;
  std::uint64_t sync_limit = std::uint64_t{1} << 30;
  // horovodrun's tuning flags and --config-file as the HOROVOD_* variables it sets (horovodrun_flags.hpp);
  // the ranks get them over hvrun's environment, under -x.
  std::vector<std::pair<std::string, std::string>> horovod_env;
  bool mpi = false;                  // --mpi (or the config file's controller: mpi): run Open MPI's mpirun
  std::string mpi_args;              // --mpi-args: shell words for mpirun
  std::string binding_args;          // --binding-args: shell words replacing "--bind-to none --map-by slot"
};

// What the command line asks for besides a launch.
enum class CliAction { kLaunch, kExit };

struct CliResult {
  CliAction action = CliAction::kLaunch;
  int exit_code = 0;  // with kExit: 0 for --help/--version
  LaunchOptions options;
};

// Parses argv with CLI11. --help and --version print to stdout and return kExit with code 0.
// Options end at the first positional (the command) or at `--`; what follows is the command, verbatim.
// `-np N` and `-np=N` are accepted as `--num-proc`. A command is required unless --check-only.
// Every malformed value, unknown option or missing command throws UsageError with one line naming
// the flag and the value; -H/--hostfile contents are parsed here too (see host_list.hpp).
CliResult parse_command_line(int argc, const char* const* argv);

}  // namespace hvrun

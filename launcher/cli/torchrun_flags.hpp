#pragma once
// torchrun's options (torch/distributed/run.py of PyTorch 2.x; tests/data/torchrun_options.tsv lists
// them), in both of torchrun's spellings (--nproc-per-node and --nproc_per_node). torchrun runs once per
// node; hvrun runs every node from one command, so a torchrun line works across the hosts of -H,
// --hostfile or Slurm when `torchrun` becomes `hvrun -H ...` (README "Coming from torchrun"):
//   - what hvrun carries out: --nproc-per-node (slots per host; gpu, cpu and auto each host's own count,
//     launcher/start/device_census.hpp), --nnodes (checked against the hosts;
//     MIN:MAX: restarts may go on with MIN hosts), -m, --no-python, --run-path (torchrun's interpreter
//     rule), --max-restarts (hvrun's own, for the whole job), --role, --rdzv-id (the run id),
//     --master-port (MASTER_PORT, static rendezvous), --rdzv-conf's join_timeout (--start-timeout);
//   - what can only agree with hvrun's plan, accepted when it does and refused naming the flag when it
//     does not: --standalone, --rdzv-backend, --rdzv-endpoint, --master-addr, --node-rank, --local-addr,
//     --monitor-interval, --start-method;
//   - --log-dir, --redirects, --tee, --local-ranks-filter: every host's rank output on this machine
//     (launcher/output/rank_logs.hpp), in either form;
//   - the rest refused with one line saying what to do instead.
// The torchrun form is on when any torchrun option other than --max-restarts and the log options is
// given; hvrun's own form (`hvrun -np 4 python train.py`) is unchanged.
#include <string>
#include <string_view>
#include <vector>

#include "launcher/cli/launch_options.hpp"

namespace CLI {
class App;
}

namespace hvrun {

// What app.parse() read of torchrun's options, as typed; settle_torchrun_options checks and maps it.
struct TorchrunFlags {
  std::string nnodes;
  std::string nproc_per_node;
  std::string rdzv_backend;
  std::string rdzv_endpoint;
  std::string rdzv_id;
  std::string rdzv_conf;
  std::string role;
  std::string master_addr;
  int master_port = 0;
  int node_rank = 0;
  std::string local_addr;
  double monitor_interval = 0.1;
  std::string start_method;
  std::string log_dir;
  std::string redirects;
  std::string tee;
  std::string local_ranks_filter;
  bool standalone = false;
  bool module = false;
  bool no_python = false;
  bool run_path = false;
};

// Each reference option of torchrun and what hvrun does with it, for the help, the README and the test
// against the reference list: `names` as torchrun spells them, `refusal` empty where hvrun accepts it.
struct TorchrunOption {
  const char* names;    // "--nproc-per-node,--nproc_per_node"
  const char* refusal;  // "" or the one line a user gets, after "NAME: "
};
const std::vector<TorchrunOption>& torchrun_options();

// Registers torchrun's options on `app` (the refused ones hidden); their values land in `flags`.
void add_torchrun_options(CLI::App& app, TorchrunFlags& flags);

// After the parse, with o.hosts, o.np, o.env and o.command known: refuses the options torchrun's line
// cannot mean under hvrun (UsageError naming the flag and the reason, exit 2); in the torchrun form sets
// every host's slots and o.np from --nproc-per-node (gpu, cpu, auto: o.per_host_count, for the census),
// o.min_np from --nnodes MIN:MAX, the run id and role,
// and rewrites o.command by torchrun's interpreter rule (interpreter_command).
void settle_torchrun_options(const CLI::App& app, const TorchrunFlags& flags, LaunchOptions& o);

// torchrun's interpreter rule: `python -u SCRIPT ARGS` (-m: `python -u -m MODULE ARGS`; --run-path: the
// script run by runpy in that interpreter; --no-python: the command as it is), with `python` the
// interpreter named by PYTHON_EXEC (from -x, else hvrun's environment), else python3 as each host's PATH
// finds it.
std::vector<std::string> interpreter_command(const std::vector<std::string>& command, const TorchrunFlags& flags,
                                             std::string_view python);

}  // namespace hvrun

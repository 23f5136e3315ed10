#pragma once
// --mpi: the Open MPI mpirun command line that runs a job over the NICs hvrun's probes chose. Pure:
// the facts come from the plan, the probes and the options; mpirun_process runs the result.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/cli/launch_options.hpp"
#include "launcher/nic/ip_subnet.hpp"

namespace hvrun {

struct MpiHost {
  std::string host;     // as given to hvrun (-H / --hostfile): mpirun reaches it by the same name
  int ranks = 0;        // ranks placed there (hosts with none are left out)
  std::string iface;    // the NIC hvrun chose there
  std::string address;  // its address
  // With MpirunInput::marker: that host's crash handler and the directory its ranks answer in (the
  // agent's, from its ready); "" where it has none (its ranks are observed without where asks).
  std::string rank_library{};
  std::string stack_dir{};
};

struct MpirunInput {
  std::vector<MpiHost> hosts;              // in rank order
  std::optional<IpSubnet> shared_subnet;   // every chosen address's subnet, if one (shared_ipv4_subnet)
  std::optional<int> ssh_port;             // -p
  std::string ssh_identity_file;           // -i
  bool ssh_strict_host_key = false;        // --ssh-strict-host-key-checking
  std::string known_hosts;                 // "" : ssh's own default; else the file hvrun checked keys against
  std::string rsh_agent;                   // --rsh-agent CMD: mpirun's plm_rsh_agent instead of ssh
  bool allow_run_as_root = false;          // given, or hvrun runs as root (horovodrun always passes it)
  bool prefix_timestamp = false;           // --timestamp-output
  std::string output_filename;             // --output-filename DIR (Open MPI's own layout)
  std::vector<std::string> forwarded;      // names of hvrun's environment to pass (-x NAME)
  std::vector<std::pair<std::string, std::string>> horovod_env;  // horovodrun's tuning variables
  std::vector<std::pair<std::string, std::optional<std::string>>> user_env;  // -x as given; these win
  std::string binding_args;                // --binding-args (shell words); "" : --bind-to none --map-by slot
  std::string mpi_args;                    // --mpi-args (shell words), before the command
  std::vector<std::string> command;
  // Non-empty: hvrun's agents observe the ranks (issue 40): one app context per host (`: `-separated),
  // each with every -x, HVRUN_MPI_MARKER, and that host's LD_PRELOAD and HVRUN_STACK_DIR.
  std::string marker;
};

// What the command line gives: ssh settings, --allow-run-as-root (or running as root), output options,
// the tuning variables, -x, --binding-args, --mpi-args, the command. The hosts, the subnet, the
// forwarded names and the known_hosts file are the caller's to add.
MpirunInput mpirun_input(const LaunchOptions& o);

// The argv, starting with "mpirun": --allow-run-as-root (see above), --tag-output, -np, -H host:ranks,...,
// binding, `-mca pml ob1 -mca btl ^openib` (as horovodrun), btl_tcp_if_include and oob_tcp_if_include
// as the shared subnet in CIDR (NIC names may differ per host), plm_rsh_args with the ssh port, key
// and host key policy (BatchMode: never a prompt) or, with --rsh-agent, plm_rsh_agent (its `CMD HOST
// PROGRAM` contract is the same), the environment with -x (HOROVOD_CONTROLLER=mpi,
// HOROVOD_CPU_OPERATIONS=mpi, NCCL_SOCKET_IFNAME naming every chosen NIC exactly, PYTHONUNBUFFERED=1,
// the tuning variables, then the user's -x, which win; then every forwarded name not set so), the
// --mpi-args words, the command. With a marker, instead of `-np N -H ...` and one command: an app context
// per host, `-np n -H host:n`, every -x again (Open MPI 4.1 gives a -x before the first context to that
// context only), the marker, the host's preload, the --mpi-args words and the command. Throws Error, naming each host's NIC and address and what to do, when
// the chosen NICs share no IPv4 subnet; UsageError when --mpi-args/--binding-args is not shell syntax.
std::vector<std::string> mpirun_argv(const MpirunInput& in);


}  // namespace hvrun

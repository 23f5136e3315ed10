#include "launcher/ranks/mpirun_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>
#include <utility>

#include "common/crash_report.hpp"
#include "common/error.hpp"
#include "common/rank_contract_names.hpp"
#include "launcher/base/shell_quote.hpp"

namespace hvrun {

namespace {

void set_env(std::vector<std::pair<std::string, std::string>>& env, const std::string& name, const std::string& value) {
  const auto it = std::find_if(env.begin(), env.end(), [&](const auto& e) { return e.first == name; });
  if (it != env.end()) {
    it->second = value;
  } else {
    env.emplace_back(name, value);
  }
}

std::string no_shared_subnet(const MpirunInput& in) {
  std::string hosts;
  for (const MpiHost& h : in.hosts) hosts += (hosts.empty() ? "" : ", ") + h.host + ": " + h.iface + " " + h.address;
  return "--mpi: the NICs hvrun chose share no IPv4 subnet (" + hosts +
         "), and Open MPI's btl_tcp_if_include/oob_tcp_if_include take one setting for all hosts; pick NICs on "
         "one subnet with --network-interface, or run without --mpi (hvrun's own launch needs no common subnet)";
}

}  // namespace

MpirunInput mpirun_input(const LaunchOptions& o) {
  MpirunInput in;
  in.ssh_port = o.ssh_port;
  in.ssh_identity_file = o.ssh_identity_file;
  in.ssh_strict_host_key = o.ssh_strict_host_key;
  in.rsh_agent = o.rsh_agent;
  in.allow_run_as_root = o.allow_run_as_root || ::geteuid() == 0;
  in.prefix_timestamp = o.prefix_timestamp;
  in.output_filename = o.output_filename;
  in.horovod_env = o.horovod_env;
  in.user_env = o.env;
  in.binding_args = o.binding_args;
  in.mpi_args = o.mpi_args;
  in.command = o.command;
  return in;
}

std::vector<std::string> mpirun_argv(const MpirunInput& in) {
  if (!in.shared_subnet) throw Error(no_shared_subnet(in));
  std::vector<std::string> a{"mpirun"};
  if (in.allow_run_as_root) a.push_back("--allow-run-as-root");
  a.push_back("--tag-output");
  int np = 0;
  std::string hosts;
  std::vector<std::string> nics;
  for (const MpiHost& h : in.hosts) {
    np += h.ranks;
    hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.ranks);
    if (std::find(nics.begin(), nics.end(), h.iface) == nics.end()) nics.push_back(h.iface);
  }
  if (in.marker.empty()) a.insert(a.end(), {"-np", std::to_string(np), "-H", hosts});
  if (in.binding_args.empty()) {
    a.insert(a.end(), {"--bind-to", "none", "--map-by", "slot"});
  } else {
    for (auto& w : shell_words(in.binding_args, "--binding-args")) a.push_back(std::move(w));
  }
  const std::string subnet = in.shared_subnet->text();
  a.insert(a.end(), {"-mca", "pml", "ob1", "-mca", "btl", "^openib", "-mca", "btl_tcp_if_include", subnet, "-mca",
                     "oob_tcp_if_include", subnet});
  if (!in.rsh_agent.empty()) {
    a.insert(a.end(), {"-mca", "plm_rsh_agent", in.rsh_agent});
  } else {
    std::string ssh = "-o BatchMode=yes -o StrictHostKeyChecking=";
    ssh += in.ssh_strict_host_key ? "yes" : "accept-new";
    if (!in.known_hosts.empty()) ssh += " -o UserKnownHostsFile=" + in.known_hosts;
    if (in.ssh_port) ssh += " -p " + std::to_string(*in.ssh_port);
    if (!in.ssh_identity_file.empty()) ssh += " -i " + in.ssh_identity_file;
    a.insert(a.end(), {"-mca", "plm_rsh_args", ssh});
  }
  if (in.prefix_timestamp) a.push_back("--timestamp-output");
  if (!in.output_filename.empty()) a.insert(a.end(), {"--output-filename", in.output_filename});

  std::vector<std::pair<std::string, std::string>> env{{"HOROVOD_CONTROLLER", "mpi"},
                                                       {"HOROVOD_CPU_OPERATIONS", "mpi"},
                                                       {"PYTHONUNBUFFERED", "1"},
                                                       {"PYTHONFAULTHANDLER", "1"}};
  std::string nccl = "=";
  for (const auto& n : nics) nccl += (nccl.size() > 1 ? "," : "") + n;
  env.emplace_back("NCCL_SOCKET_IFNAME", nccl);
  for (const auto& [name, value] : in.horovod_env) set_env(env, name, value);
  std::set<std::string> passed;
  for (const auto& [name, value] : in.user_env) {
    if (value) {
      set_env(env, name, *value);
    } else {
      // std::erase_if, not a lambda: clang 14 cannot capture a structured binding.
      const std::string& unset = name;
      std::erase_if(env, [&unset](const auto& e) { return e.first == unset; });
      passed.insert(name);
    }
  }
  std::vector<std::string> exports;
  for (const auto& [name, value] : env) exports.insert(exports.end(), {"-x", name + "=" + value});
  for (const auto& name : in.forwarded) passed.insert(name);
  for (const auto& name : passed)
    if (std::none_of(env.begin(), env.end(), [&](const auto& e) { return e.first == name; }))
      exports.insert(exports.end(), {"-x", name});
  std::vector<std::string> mpi_args = shell_words(in.mpi_args, "--mpi-args");
  if (in.marker.empty()) {
    a.insert(a.end(), exports.begin(), exports.end());
    a.insert(a.end(), mpi_args.begin(), mpi_args.end());
    a.insert(a.end(), in.command.begin(), in.command.end());
    return a;
  }
  // One app context per host: its preload is its own. --mpi-args stay global, before the first context.
  a.insert(a.end(), mpi_args.begin(), mpi_args.end());
  const auto user_preload = std::find_if(env.begin(), env.end(), [](const auto& e) { return e.first == "LD_PRELOAD"; });
  bool first = true;
  for (const MpiHost& h : in.hosts) {
    if (h.ranks == 0) continue;
    if (!std::exchange(first, false)) a.push_back(":");
    a.insert(a.end(), {"-np", std::to_string(h.ranks), "-H", h.host + ":" + std::to_string(h.ranks)});
    for (std::size_t k = 0; k + 1 < exports.size(); k += 2)
      if (!h.rank_library.empty() && user_preload != env.end() && exports[k + 1].starts_with("LD_PRELOAD="))
        continue;  // given below, after the crash handler
      else
        a.insert(a.end(), {exports[k], exports[k + 1]});
    a.insert(a.end(), {"-x", std::string(rank_contract::kMpiMarker) + "=" + in.marker});
    if (!h.rank_library.empty()) {
      const std::string user = user_preload != env.end() ? ":" + user_preload->second : "";
      a.insert(a.end(), {"-x", "LD_PRELOAD=" + h.rank_library + user, "-x",
                         std::string(crash_report::kStackDirVariable) + "=" + h.stack_dir});
    }
    a.insert(a.end(), in.command.begin(), in.command.end());
  }
  return a;
}

}  // namespace hvrun

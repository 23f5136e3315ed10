#pragma once
// hvrun's command-line options as CLI11 definitions, in one place for both of their readers: hvrun's
// parser (parse_command_line, launch_options.cpp) and hvrun-docs (cmd/hvrun_docs_main.cpp), which writes
// the man page and the bash completion from them at build time, so neither can drift from the parser.
// define_options is implemented in launch_options.cpp, next to the validators it attaches.
#include <string>
#include <vector>

#include "launcher/cli/horovodrun_flags.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/torchrun_flags.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hvrun {

// Where app.parse() puts what it read: straight into `o` where LaunchOptions holds the value as typed,
// into the raw fields below where parse_command_line converts or checks it after the parse. The option
// pointers are the ones parse_command_line asks afterwards whether they were given.
struct CliBindings {
  explicit CliBindings(LaunchOptions& options) : o(options) {}

  LaunchOptions& o;
  int np = 0;
  std::vector<std::string> host_lists;
  std::string hostfile;
  int ssh_port = 0;
  double start_timeout = 30;
  double kill_grace = 3;
  double heartbeat_timeout = 20;
  double stall_timeout = 0;  // off
  double ssh_connect_timeout = 10;
  double probe_timeout = 1;
  std::vector<std::string> env;
  std::string launcher = "auto";
  std::string log_level;   // --hvrun-log-level, checked against the level names by CLI11
  std::string log_subsys;  // --hvrun-log-subsys, parsed by parse_log_subsys
  std::string ranks_filter;  // --ranks-filter, parsed by parse_rank_list
  HorovodrunFlags horovodrun;
  TorchrunFlags torchrun;

  CLI::Option* hosts_opt = nullptr;
  CLI::Option* hostfile_opt = nullptr;
  CLI::Option* port_opt = nullptr;
  CLI::Option* identity_opt = nullptr;
  CLI::Option* connect_timeout_opt = nullptr;
  CLI::Option* strict_opt = nullptr;
  CLI::Option* rsh_opt = nullptr;
  CLI::Option* level_opt = nullptr;
  CLI::Option* subsys_opt = nullptr;
};

// Gives `app` hvrun's name, description, footer, version flag and help layout, and defines every option
// (hvrun's own and horovodrun's, add_horovodrun_options) bound to `b`, which must outlive the parse.
void define_options(CLI::App& app, CliBindings& b);

}  // namespace hvrun

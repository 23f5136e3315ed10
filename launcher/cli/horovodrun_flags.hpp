#pragma once
// horovodrun's options (horovod/runner/launch.py, v0.28.1) that hvrun's own option set does not have:
// the tuning knobs, --config-file, the controllers, --check-build, --disable-cache, the MPI pass-through
// options, and the ones hvrun refuses (elastic training, --jsrun). hvrun's own parser
// (launch_options.cpp) holds the options both share: -np, -H, --hostfile, -p, -i, --start-timeout,
// --network-interface(s), --output-filename, --verbose, --prefix-output-with-timestamp.
#include <string>
#include <tuple>
#include <vector>

#include "launcher/cli/horovod_tuning.hpp"
#include "launcher/cli/launch_options.hpp"

namespace CLI {
class App;
}

namespace hvrun {

struct HorovodrunFlags {
  std::vector<std::tuple<std::string, std::string, std::string>> knobs;  // (dest, value, flag) as typed
  std::string config_file;
  bool gloo = false;
  bool mpi = false;
  bool jsrun = false;
  bool check_build = false;
  bool disable_cache = false;
  std::string mpi_args;
  std::string binding_args;
};

// Registers the options on `app`; their values land in `flags` during app.parse().
void add_horovodrun_options(CLI::App& app, HorovodrunFlags& flags);

// After the parse: refuses what hvrun cannot honour (UsageError, exit 2, one line saying what to use
// instead), applies the knobs and --config-file with horovodrun's precedence (a knob given as a flag
// wins over the file wherever the flag stands; the file's controller applies only without --gloo and
// --mpi), checks them as horovodrun does, and sets o.horovod_env, o.mpi, o.mpi_args, o.binding_args.
void settle_horovodrun_options(const CLI::App& app, const HorovodrunFlags& flags, LaunchOptions& o);

// What `hvrun --check-build` prints: the controllers and launcher features this hvrun supports.
std::string check_build_text();

}  // namespace hvrun

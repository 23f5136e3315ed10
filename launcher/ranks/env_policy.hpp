#pragma once
// What environment the ranks start from (README, "The rank environment"): hvrun's own environment,
// overridden by horovodrun's tuning flags (HOROVOD_*), overridden by -x; a host other than this machine
// gets it without the variables that describe the launcher's own host or terminal. The rank contract
// and -x's win over it are applied per rank on top (rank_env.hpp, user_env.hpp).
#include <map>
#include <string>
#include <vector>

#include "launcher/cli/launch_options.hpp"

namespace hvrun {

using Environment = std::map<std::string, std::string>;

// hvrun's own environment (environ) as NAME -> value; entries without '=' or with an empty name are
// left out.
Environment launcher_environment();

// True for a variable that describes the launcher's host or terminal and would be wrong on another
// host (HOSTNAME, PWD, SHLVL, DISPLAY, TERM, SSH_*, BASH_FUNC_*, XDG_SESSION_*, ...; README lists them).
bool host_specific(const std::string& name);

class EnvPolicy {
 public:
  // `launcher_env`: hvrun's environment (launcher_environment(), or a test's).
  EnvPolicy(Environment launcher_env, const LaunchOptions& options);

  // What ranks on this machine start from: hvrun's environment, then options.horovod_env, then -x
  // (VAR=VALUE as given; a bare VAR keeps the value it already has).
  const Environment& local() const { return local_; }
  // The same for another host: local() without host_specific() variables.
  const Environment& remote() const { return remote_; }
  // The -x variables with their values (user_variables): they win over the rank contract too.
  const Environment& user() const { return user_; }
  // Bare -x names that have no value to pass (not in hvrun's environment nor set before): each is
  // worth a warning, none reaches the ranks.
  const std::vector<std::string>& unset() const { return unset_; }
  // The names --mpi forwards to mpirun's ranks (-x NAME): hvrun's environment without host_specific().
  std::vector<std::string> forwarded_names() const;

 private:
  Environment launcher_;
  Environment local_;
  Environment remote_;
  Environment user_;
  std::vector<std::string> unset_;
};

}  // namespace hvrun

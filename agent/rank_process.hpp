#pragma once
// Starting one rank: its own process group, its working directory and environment, stdout and
// stderr on pipes, stdin from /dev/null, and SIGKILL if the agent dies (PR_SET_PDEATHSIG).
#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/wire/error.hpp"
#include "agent/wire/unique_fd.hpp"

namespace hvrun {

struct RankSpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the rank's own PATH
  std::vector<std::string> env;   // "NAME=value"
  std::string cwd;
};

struct RankProcess {
  pid_t pid = -1;        // also the process group id
  UniqueFd out, err;     // read ends, close-on-exec
};

// Forks and execs. Returns once the exec has happened; a failed chdir or exec comes back as a thrown
// SpawnError carrying the text users see ("cannot execute 'X': No such file or directory"); the
// failed child has already been reaped.
RankProcess spawn_rank(const RankSpawnSpec& spec);

class SpawnError : public Error {
 public:
  using Error::Error;
};

// In a child right after fork (async-signal-safe only): its own process group, `death_signal` when
// `parent` dies (checked again after arming, to close the race with an early death), an empty signal
// mask and default SIGPIPE. Returns false when the parent is already gone.
bool detach_child(int death_signal, pid_t parent) noexcept;

// Sends `sig` to the process group led by `pgid`; a group that no longer exists is not an error.
void signal_group(pid_t pgid, int sig);

// "SIGSEGV" for 11; "signal 64" for numbers without a name.
std::string signal_name(int sig);

}  // namespace hvrun

#pragma once
// Starting one rank: its own process group, its working directory and environment, stdout and
// stderr on pipes, stdin from /dev/null, and SIGKILL if the agent dies (PR_SET_PDEATHSIG).
#include <sys/types.h>

#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "common/unique_fd.hpp"

namespace hvrun {

struct RankSpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the rank's own PATH
  std::vector<std::string> env;   // "NAME=value"
  std::string cwd;
};

struct RankProcess {
  Child process;      // its pid is also the process group id; the agent reaps the rank through it
  UniqueFd out, err;  // read ends, close-on-exec
};

// Forks and execs. Returns once the exec has happened; a failed chdir or exec comes back as a thrown
// SpawnError carrying the text users see ("cannot execute 'X': No such file or directory" and what to
// do about it); the failed child has already been reaped.
RankProcess spawn_rank(const RankSpawnSpec& spec);

}  // namespace hvrun

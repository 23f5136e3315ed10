#pragma once
// --mpi: running Open MPI's mpirun as hvrun's child, its output and exit status becoming hvrun's.
#include <optional>
#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace hvrun {

// The absolute path of `mpirun` on hvrun's PATH, if it is there and executable.
std::optional<std::string> find_mpirun();

// The known_hosts file hvrun's own SSH used when ssh(1) would read another: hvrun takes ~ from $HOME,
// OpenSSH from the password database. "" when they agree (or $HOME is unset): ssh's default is right.
std::string known_hosts_for_mpirun();

// Runs argv (argv[0] looked up on PATH) with hvrun's stdin, stdout, stderr and environment, in hvrun's
// process group (so a terminal's Ctrl-C reaches it directly and it may read the terminal for rank 0).
// SIGINT, SIGTERM and SIGHUP sent to hvrun alone (kill, not the terminal) are passed on to it; if hvrun
// dies it gets SIGTERM (PR_SET_PDEATHSIG), and mpirun stops its ranks. Returns its exit code, or 128+N
// when signal N ended it. Throws Error when it cannot be started (127 is the exit code to use then).
int run_mpirun(const std::vector<std::string>& argv);

// run_mpirun's two halves, for a launcher that goes on while mpirun runs (--mpi with the ranks
// observed: its agents stay): starts it as run_mpirun does (throws Error the same way), and waits for it
// as run_mpirun does (the signals it takes are blocked meanwhile, and restored).
Child start_mpirun(const std::vector<std::string>& argv);
int wait_mpirun(Child& mpirun);
// Whether hvrun's process group is its terminal's foreground group: then a SIGINT or SIGHUP came from
// the terminal to mpirun as well, and is not to be passed on again.
bool signal_from_terminal();

}  // namespace hvrun

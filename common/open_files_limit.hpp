#pragma once
// hvrun's and the agent's limit on open files (RLIMIT_NOFILE). hvrun holds a few descriptors per host
// (the channel, an SSH socket or a command's socketpair and stderr pipe), so a job of hundreds of hosts
// needs more than the usual soft limit of 1024 (it runs out at about 200 hosts, and at 12 under
// `ulimit -n 64`); the agent's listeners take connections from anyone on the network, bounded to a
// quarter of the limit each (common/stranger_gate.hpp). At start both raise their soft limit to the
// hard limit; the agent's ranks get the original back (ChildSpec::open_files). The processes it starts
// (the local agent, --rsh-agent and srun commands, `ssh -G`, mpirun) get the user's original soft
// limit back, as a plain shell or srun's PropagateResourceLimits would give them: ranks do not
// inherit a raised limit they did not ask for.
#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace hvrun {

// Raises this process's soft RLIMIT_NOFILE to its hard limit and remembers the original limits. Call
// once, at start, before any thread or child exists. A limit that cannot be read or raised is logged at
// debug level and left as it is (hvrun then works up to that limit).
void raise_open_files_limit();

// The limits this process had before raise_open_files_limit(); the current ones when it has not raised.
rlimit original_open_files_limit();

// `argv` as a command to spawn (posix_spawnp) that runs with the original soft limit: when hvrun raised
// its own, `/bin/sh -c 'ulimit -Sn N; exec "$@"' hvrun-nofile ARGV...` (the shell searches PATH for
// ARGV[0] as execvp does, and a command it does not find exits 127); else `argv` itself. For commands
// whose descendants are ranks (--rsh-agent, srun): a prlimit after the spawn comes too late for a
// child the command starts at once, which on a loaded machine can keep the raised limit.
std::vector<std::string> with_original_open_files_limit(std::vector<std::string> argv);

// Gives `pid`, a child that hvrun has just started with posix_spawn (no hook runs between its fork
// and its exec), the original limit back with prlimit. Nothing when the limit was not raised. The
// child is already running its program when this is called, so a process it starts before (a loaded
// machine can make that milliseconds) keeps the raised limit: for `ssh -G` only, whose only children
// are a 'Match exec' test. A child that already exited (ESRCH) or one that may not be changed (EPERM:
// it executed a set-user-ID program) is logged at debug level, not an error: it only runs with the
// higher limit. `what` names the child for that log line.
void restore_open_files_limit(pid_t pid, const std::string& what);

// The limit a forked child sets before it executes (ChildSpec::open_files): the original one when
// hvrun raised its own, else none.
std::optional<rlimit> open_files_limit_for_children();

}  // namespace hvrun

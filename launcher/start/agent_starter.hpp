#pragma once
// How the agent of a host other than this machine is started: over hvrun's own SSH session (the
// default), or by a local command: `--rsh-agent CMD` runs `CMD HOST /bin/sh` (README: "Any remote shell"
// states the contract such a command keeps), and inside a Slurm allocation srun runs one step per node.
// Every way runs the agent check script (agent_check.hpp): an agent runs only if it is this hvrun's.
#include <functional>
#include <memory>
#include <string>

#include "launcher/cli/launch_options.hpp"
#include "launcher/ssh/ssh_session.hpp"
#include "launcher/start/host_agent.hpp"

namespace hvrun {

// How hvrun's own SSH reaches `host` under `options` (-p, -i, --ssh-connect-timeout, strictness).
SshTarget ssh_target_of(const LaunchOptions& options, const std::string& host);

// Starts the agent of `host` as `options` say and waits until it is up; blocks (run it on a thread of
// its own). `local_agent` is this machine's hvrun-agent (absolute path). Throws Error, one line
// starting with the host. `shell_started`: Connector::StartAgent's.
std::unique_ptr<HostAgent> start_host_agent(const LaunchOptions& options, const std::string& host,
                                            const std::string& local_agent,
                                            const std::function<void()>& shell_started = {});

}  // namespace hvrun

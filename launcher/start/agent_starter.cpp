#include "launcher/start/agent_starter.hpp"

#include "launcher/start/command_agent.hpp"
#include "launcher/start/remote_agent.hpp"
#include "launcher/start/start_progress.hpp"

namespace hvrun {

namespace {

std::unique_ptr<HostAgent> start_over_ssh(const LaunchOptions& options, const std::string& host,
                                          const std::string& local_agent, const std::function<void()>& shell_started) {
  RemoteAgentOptions o;
  o.ssh = ssh_target_of(options, host);
  o.agent_override = options.agent_path;
  o.local_agent = local_agent;
  o.shell_timeout = shell_timeout_of(options.start_timeout);
  o.shell_started = shell_started;
  return RemoteAgent::start(o);
}

// `CMD HOST AGENT`: CMD is a shell command line (quotes and variables work), HOST and AGENT are
// appended to it as two words of their own, whatever characters they hold. A remote shell gets no
// search for the agent (a `docker exec` runs no shell to search with): it runs at --agent-path, else
// at hvrun's own agent's path, as on a shared file system or an image built with hvrun in it.
std::unique_ptr<HostAgent> start_by_rsh(const LaunchOptions& options, const std::string& host,
                                        const std::string& local_agent) {
  const std::string agent = options.agent_path.empty() ? local_agent : options.agent_path;
  CommandAgentOptions o;
  o.host = host;
  o.argv = {"/bin/sh", "-c", options.rsh_agent + " \"$@\"", "hvrun-rsh-agent", host, agent};
  o.label = "--rsh-agent '" + options.rsh_agent + "'";
  o.fix = "check that `" + options.rsh_agent + " " + host + " " + agent +
          " --version` works here (--agent-path names the agent's path on the host)";
  o.start_timeout = options.start_timeout;
  return CommandAgent::start(o);
}

// One job step per node, each with its own stdin and stdout as the agent's channel: a single step of
// N tasks would merge their outputs into one stream. --overlap lets the step share the allocation's
// CPUs with the step hvrun may run in (sbatch) and with other steps; --kill-on-bad-exit and Slurm's
// own teardown end it with the job (scancel, time limit). The explicit counts override what srun
// would take from the allocation's SLURM_NTASKS and the like. --unbuffered: without it slurmstepd
// holds back output until a newline (measured on 22.05: a frame's tail waited for the next one); with
// it the agent's stdout is a raw pseudo-terminal that passes every byte value on as it comes.
std::unique_ptr<HostAgent> start_by_srun(const LaunchOptions& options, const std::string& host,
                                         const std::string& local_agent) {
  const std::string agent = options.agent_path.empty() ? local_agent : options.agent_path;
  CommandAgentOptions o;
  o.host = host;
  o.argv = {"srun",          "--nodes=1",          "--ntasks=1",   "--ntasks-per-node=1",
            "--nodelist=" + host, "--overlap",     "--kill-on-bad-exit=1", "--unbuffered",
            "--mpi=none",    "--job-name=hvrun-agent", agent};
  o.label = "srun";
  o.fix = "check that `srun -N1 -w " + host + " " + agent +
          " --version` works in this allocation (--agent-path names the agent's path on the nodes)";
  o.start_timeout = options.start_timeout;
  return CommandAgent::start(o);
}

}  // namespace

SshTarget ssh_target_of(const LaunchOptions& options, const std::string& host) {
  SshTarget t;
  t.host = host;
  t.port = options.ssh_port;
  t.identity_file = options.ssh_identity_file;
  t.connect_timeout = options.ssh_connect_timeout;
  t.strict_host_key = options.ssh_strict_host_key;
  return t;
}

std::unique_ptr<HostAgent> start_host_agent(const LaunchOptions& options, const std::string& host,
                                            const std::string& local_agent, const std::function<void()>& shell_started) {
  switch (options.launcher) {
    case AgentLauncher::kRsh: return start_by_rsh(options, host, local_agent);
    case AgentLauncher::kSlurm: return start_by_srun(options, host, local_agent);
    case AgentLauncher::kSsh: break;
  }
  return start_over_ssh(options, host, local_agent, shell_started);
}

}  // namespace hvrun

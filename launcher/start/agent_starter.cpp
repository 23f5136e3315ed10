#include "launcher/start/agent_starter.hpp"

#include "launcher/start/agent_check.hpp"
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

// The check script of a host reached by a command: --agent-path, else the path of hvrun's own agent (a
// shared file system, an image built with hvrun in it), else `hvrun-agent` on the host's PATH. No cached
// copy: without hvrun's SFTP there is none to make.
AgentCheckPlan command_plan(const LaunchOptions& options, const std::string& local_agent) {
  AgentCheckPlan plan;
  plan.digest = agent_digest(local_agent);
  plan.paths = {options.agent_path.empty() ? local_agent : options.agent_path};
  plan.search_path = options.agent_path.empty();
  return plan;
}

std::string missing_text(const LaunchOptions& options, const std::string& local_agent) {
  return options.agent_path.empty() ? "no executable hvrun-agent at " + local_agent + " or on the PATH"
                                    : "no executable file at --agent-path " + options.agent_path;
}

// `CMD HOST /bin/sh`: CMD is a shell command line (quotes and variables work), HOST and /bin/sh are
// appended to it as two words of their own, whatever characters HOST holds. Both words read the same to
// a command that passes its argv on (`docker exec -i`, `kubectl exec -i ... --`) and to one that joins
// its words for a remote shell (`ssh -p 2222`), which a `sh -c SCRIPT` word would not. The check script
// goes to the shell on stdin, ahead of the channel: the agent speaks first (its hello), so nothing else
// is in the pipe while the shell reads the script, and the agent it executes takes stdin over.
std::unique_ptr<HostAgent> start_by_rsh(const LaunchOptions& options, const std::string& host,
                                        const std::string& local_agent) {
  const std::string agent = options.agent_path.empty() ? local_agent : options.agent_path;
  CommandAgentOptions o;
  o.host = host;
  o.argv = {"/bin/sh", "-c", options.rsh_agent + " \"$@\"", "hvrun-rsh-agent", host, "/bin/sh"};
  o.label = "--rsh-agent '" + options.rsh_agent + "'";
  o.fix = "check that `echo 'exec " + agent + " --version' | " + options.rsh_agent + " " + host +
          " /bin/sh` works here (--agent-path names the agent's path on the host)";
  o.start_timeout = options.start_timeout;
  o.stdin_script = agent_check_script(command_plan(options, local_agent));
  o.digest = agent_digest(local_agent);
  o.missing = missing_text(options, local_agent);
  return CommandAgent::start(o);
}

// One job step per node, each with its own stdin and stdout as the agent's channel: a single step of
// N tasks would merge their outputs into one stream. --overlap lets the step share the allocation's
// CPUs with the step hvrun may run in (sbatch) and with other steps; --kill-on-bad-exit and Slurm's
// own teardown end it with the job (scancel, time limit). The explicit counts override what srun
// would take from the allocation's SLURM_NTASKS and the like. --unbuffered: without it slurmstepd
// holds back output until a newline (measured on 22.05: a frame's tail waited for the next one); with
// it the agent's stdout is a raw pseudo-terminal that passes every byte value on as it comes. The check
// script goes on stdin to `/bin/sh`, as with --rsh-agent: in argv, its SHA-256 would read like a secret
// to anyone who looks for one in `ps` (and the tests do).
std::unique_ptr<HostAgent> start_by_srun(const LaunchOptions& options, const std::string& host,
                                         const std::string& local_agent) {
  const std::string agent = options.agent_path.empty() ? local_agent : options.agent_path;
  CommandAgentOptions o;
  o.host = host;
  o.argv = {"srun",          "--nodes=1",          "--ntasks=1",   "--ntasks-per-node=1",
            "--nodelist=" + host, "--overlap",     "--kill-on-bad-exit=1", "--unbuffered",
            "--mpi=none",    "--job-name=hvrun-agent", "/bin/sh"};
  o.label = "srun";
  o.fix = "check that `srun -N1 -w " + host + " " + agent +
          " --version` works in this allocation (--agent-path names the agent's path on the nodes)";
  o.start_timeout = options.start_timeout;
  o.stdin_script = agent_check_script(command_plan(options, local_agent));
  o.digest = agent_digest(local_agent);
  o.missing = missing_text(options, local_agent);
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

#include "launcher/start/remote_agent.hpp"

#include <memory>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/io_sizes.hpp"
#include "common/job_secret.hpp"
#include "common/log.hpp"
#include "launcher/start/agent_check.hpp"
#include "launcher/start/start_progress.hpp"

namespace hvrun {

namespace {

// Waits for the check script's report and the agent's hello; a host whose shell says nothing in time is
// stuck (shell_stuck_text).
AgentCheckReport await_agent(const SshExec& exec, std::chrono::milliseconds timeout, const std::string& host) {
  AgentCheckReport report = read_agent_check(exec.fd(), timeout, host);
  if (report.end == AgentCheckReport::End::kTimeout) throw TimeoutError(shell_stuck_text(host, timeout));
  return report;
}

std::string stderr_summary(const SshExec& exec) {
  std::string tail = exec.stderr_tail();
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  const auto nl = tail.rfind('\n');
  return nl == std::string::npos ? tail : tail.substr(nl + 1);
}

bool is_cache_copy(const std::string& path, const std::string& rel) {
  return path.size() >= rel.size() && path.compare(path.size() - rel.size(), rel.size(), rel) == 0;
}

}  // namespace

RemoteAgent::RemoteAgent(SshSession session, SshExec exec, std::string description,
                         std::chrono::milliseconds shell_time)
    : session_(std::move(session)),
      exec_(std::move(exec)),
      description_(std::move(description)),
      shell_time_(shell_time) {}

RemoteAgent::~RemoteAgent() = default;

UniqueFd RemoteAgent::take_channel() { return UniqueFd(exec_.release_fd()); }

std::string RemoteAgent::stderr_tail() const { return exec_.stderr_tail(); }

void RemoteAgent::copy_files(const std::vector<FileCopy>& files, std::chrono::milliseconds timeout,
                             const std::function<void(std::uint64_t)>& copied) {
  session_.upload_files(files, 0755, timeout, copied);
}

std::unique_ptr<RemoteAgent> RemoteAgent::start(const RemoteAgentOptions& o) {
  const std::string& host = o.ssh.host;
  prefetch_agent_digest(o.local_agent);  // hashed (3 ms) while the session connects
  SshSession session = SshSession::connect(o.ssh);
  const std::string& digest = agent_digest(o.local_agent);
  const std::string rel = agent_cache_dir(digest) + "/hvrun-agent";

  // One round trip where an agent is found: the script checks each place and executes the first agent
  // that passes, ending with the cached copy of hvrun's own (after a mismatch only, with --agent-path).
  AgentCheckPlan plan;
  plan.digest = digest;
  plan.paths = {o.agent_override.empty() ? o.local_agent : o.agent_override};
  plan.search_path = o.agent_override.empty();
  plan.cache = true;
  plan.cache_after_mismatch = !o.agent_override.empty();
  const auto exec_sent = std::chrono::steady_clock::now();
  SshExec exec = session.exec(agent_check_script(plan));
  if (o.shell_started) o.shell_started();
  const AgentCheckReport report = await_agent(exec, o.shell_timeout, host);
  const auto shell_time =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - exec_sent);
  // One warning for whatever was there but not this hvrun's agent; an agent that is simply absent is
  // no news.
  const std::string differs = findings_text(report.findings, digest);
  auto warn_used = [&](const std::string& used) {
    if (!differs.empty())
      log_of(LogSubsys::kStart)
          .warn("{}: {}; running {} instead (this hvrun's own agent, verified); install this hvrun's build there "
                "or remove it to silence this",
                host, differs, used);
  };
  if (report.end == AgentCheckReport::End::kHello) {
    const std::string ran = report.ran();
    const bool cached = is_cache_copy(ran, rel);
    std::string description = cached ? "cached copy ~/" + rel : "found on the host (" + ran + ")";
    warn_used(cached ? "~/" + rel : ran);
    return std::unique_ptr<RemoteAgent>(new RemoteAgent(std::move(session), std::move(exec), description, shell_time));
  }
  exec.wait(std::chrono::seconds(5));
  const std::string said = stderr_summary(exec);
  if (!report.none() || exec.exit_status() != kAgentCheckNoneStatus)
    throw Error(host + ": hvrun-agent ended before it said hello" +
                (said.empty() ? std::string() : " (it wrote: " + said + ")") +
                (o.agent_override.empty() ? "" : "; check --agent-path " + o.agent_override));
  if (!o.agent_override.empty() && differs.empty())
    throw Error(host + ": hvrun-agent ended before it said hello (no executable file at " + o.agent_override +
                "); check --agent-path " + o.agent_override);
  for (const auto& f : report.findings) {
    if (f.what == "dir-owner" || f.what == "dir-mode")
      throw Error(host + ": " + finding_text(f, digest) +
                  ", and hvrun keeps its own copy of hvrun-agent there; remove that folder (hvrun makes it anew, "
                  "mode 0700)");
  }

  // No agent that passed: upload hvrun's own under a name of its own, and let the script rename(2) it
  // over the final name with mv -f before it checks and executes it. Hosts that share one home
  // directory (NFS) copy at the same time, and SFTP v3 cannot rename over an existing file, so an
  // SFTP-only replace would leave a moment where another launcher finds no file at all. Every copy has
  // the same content, so whichever rename lands last is as good as the others.
  AgentCheckPlan copied;
  copied.digest = digest;
  copied.cache = true;
  copied.staged = rel + ".upload-" + hex_encode(random_bytes(8));
  session.upload(o.local_agent, copied.staged, 0700, o.shell_timeout);
  SshExec cached = session.exec(agent_check_script(copied));
  const AgentCheckReport after = await_agent(cached, o.shell_timeout, host);
  if (after.end != AgentCheckReport::End::kHello) {
    cached.wait(std::chrono::seconds(5));
    const std::string failed = findings_text(after.findings, digest);
    if (!failed.empty())
      throw Error(host + ": the copy of hvrun-agent uploaded to ~/" + rel + " failed its check: " + failed +
                  "; check that file system, and that `openssl dgst -sha256` or `sha256sum` works there");
    const std::string why = stderr_summary(cached);
    throw Error(host + ": the copied hvrun-agent did not start" + (why.empty() ? std::string() : ": " + why) +
                " (is the host's OS or CPU different from this one?)");
  }
  warn_used("~/" + rel);
  return std::unique_ptr<RemoteAgent>(
      new RemoteAgent(std::move(session), std::move(cached), "copied to ~/" + rel, shell_time));
}

}  // namespace hvrun

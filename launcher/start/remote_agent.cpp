#include "launcher/start/remote_agent.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/file_digest.hpp"
#include "common/io_sizes.hpp"
#include "common/job_secret.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/start/start_progress.hpp"

namespace hvrun {

namespace {

// The agent says this on stderr and exits with it when the script finds no agent binary.
constexpr const char* kMissingMarker = "hvrun-agent-not-found";
constexpr int kMissingStatus = 127;

// One round trip in the common case: the remote shell tries each place and execs the first agent.
std::string locate_and_exec(const RemoteAgentOptions& o) {
  if (!o.agent_override.empty())
    return "exec " + shell_quote(o.agent_override);
  const std::string abs = shell_quote(o.local_agent);
  return "if [ -x " + abs + " ]; then exec " + abs +
         "; elif command -v hvrun-agent >/dev/null 2>&1; then exec hvrun-agent; else echo " + kMissingMarker +
         " >&2; exit " + std::to_string(kMissingStatus) + "; fi";
}

std::string cache_dir(const std::string& digest) { return ".cache/hvrun/agent-" + digest; }

// Waits for the agent's first bytes (its hello) without consuming them. False when the channel
// ended first.
bool wait_first_bytes(const SshExec& exec, std::chrono::milliseconds timeout, const std::string& host) {
  pollfd p{exec.fd(), POLLIN, 0};
  const int n = retry_eintr([&] { return ::poll(&p, 1, static_cast<int>(timeout.count())); });
  if (n < 0) throw_errno("poll", "waiting for the agent on " + host);
  if (n == 0) throw TimeoutError(shell_stuck_text(host, timeout));
  char c;
  const ssize_t got = retry_eintr([&] { return ::recv(exec.fd(), &c, 1, MSG_PEEK); });
  return got > 0;
}

std::string stderr_summary(const SshExec& exec) {
  std::string tail = exec.stderr_tail();
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  const auto nl = tail.rfind('\n');
  return nl == std::string::npos ? tail : tail.substr(nl + 1);
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
  SshSession session = SshSession::connect(o.ssh);

  const auto exec_sent = std::chrono::steady_clock::now();
  SshExec exec = session.exec(locate_and_exec(o));
  if (o.shell_started) o.shell_started();
  const bool said_hello = wait_first_bytes(exec, o.shell_timeout, host);
  const auto shell_time =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - exec_sent);
  if (said_hello) {
    return std::unique_ptr<RemoteAgent>(
        new RemoteAgent(std::move(session), std::move(exec),
                        o.agent_override.empty() ? "found on the host" : o.agent_override, shell_time));
  }
  exec.wait(std::chrono::seconds(5));
  const std::string said = stderr_summary(exec);
  if (!o.agent_override.empty() || exec.exit_status() != kMissingStatus ||
      exec.stderr_tail().find(kMissingMarker) == std::string::npos) {
    throw Error(host + ": hvrun-agent ended before it said hello" +
                (said.empty() ? std::string() : " (it wrote: " + said + ")") +
                (o.agent_override.empty() ? "" : "; check --agent-path " + o.agent_override));
  }

  // No agent on the host: use (or make) the cached copy of ours, checking its hash every time.
  const std::string digest = sha256_file(o.local_agent);
  const std::string rel = cache_dir(digest) + "/hvrun-agent";
  const std::string path = "\"$HOME\"/" + rel;
  const std::string check = "[ -x " + path + " ] && [ \"$(stat -c %a " + path + ")\" = 700 ] && " +
                            "[ \"$(sha256sum < " + path + " | cut -d' ' -f1)\" = " + digest + " ]";
  std::string description = "cached copy ~/" + rel;
  if (session.run(check, o.shell_timeout).exit_status != 0) {
    // Upload under a name of our own, then rename(2) it over the final name with mv -f: hosts that
    // share one home directory (NFS) copy at the same time, and SFTP v3 cannot rename over an existing
    // file, so an SFTP-only replace would leave a moment where another launcher finds no file at all.
    // Every copy has the same content, so whichever rename lands last is as good as the others.
    const std::string staged = rel + ".upload-" + hex_encode(random_bytes(8));
    session.upload(o.local_agent, staged, 0700, o.shell_timeout);
    const std::string staged_path = "\"$HOME\"/" + staged;
    const RunResult verify =
        session.run("mv -f " + staged_path + " " + path + " || { rm -f " + staged_path + "; exit 1; }; " + check,
                    o.shell_timeout);
    if (verify.exit_status != 0)
      throw Error(host + ": the copy of hvrun-agent in ~/" + rel +
                  " does not have the right content or mode 0700 after upload; check that file system");
    description = "copied to ~/" + rel;
  }
  SshExec cached = session.exec("exec " + path);
  if (!wait_first_bytes(cached, o.shell_timeout, host)) {
    cached.wait(std::chrono::seconds(5));
    const std::string why = stderr_summary(cached);
    throw Error(host + ": the copied hvrun-agent did not start" + (why.empty() ? std::string() : ": " + why) +
                " (is the host's OS or CPU different from this one?)");
  }
  return std::unique_ptr<RemoteAgent>(new RemoteAgent(std::move(session), std::move(cached), description, shell_time));
}

}  // namespace hvrun

#pragma once
// The agent of a remote host: one SSH session to the host, and hvrun-agent running over one exec
// channel of it, bridged to a local socket that speaks the same protocol as a local agent.
//
// The agent binary is found, in this order: --agent-path; the absolute path of the launcher's own
// agent (shared file systems are the norm); `hvrun-agent` on the remote PATH; a copy that hvrun
// keeps in ~/.cache/hvrun/agent-<sha256>/ on the host (its folder the user's, not writable by others),
// uploaded over SFTP when missing or different. Each runs only if it passes the check of
// agent_check.hpp in the same remote step that executes it; one that is there but fails is not run,
// and a warning names it (with --agent-path, the cached copy is tried only then).
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/unique_fd.hpp"
#include "launcher/ssh/ssh_session.hpp"
#include "launcher/start/host_agent.hpp"

namespace hvrun {

struct RemoteAgentOptions {
  SshTarget ssh;                      // host, -p, -i, timeouts, strictness
  std::string agent_override;         // --agent-path; empty: search as above
  std::string local_agent;            // this machine's hvrun-agent (absolute path)
  // Each command's bound once the session is up (the check script and the agent's hello, and the
  // upload of a copy): the host's login shell runs before each, and a slow one is progress, not a dead host
  // (shell_timeout_of). Until the session is up, ssh.connect_timeout bounds the start.
  std::chrono::milliseconds shell_timeout{300'000};
  std::function<void()> shell_started;  // called once the first exec request is sent; may be empty
};

class RemoteAgent final : public HostAgent {
 public:
  // Connects and starts the agent; blocks (run it on a thread of its own). Returns once the agent has
  // written its first bytes. Throws SshError or Error, one line starting with the host.
  static std::unique_ptr<RemoteAgent> start(const RemoteAgentOptions& options);
  ~RemoteAgent() override;

  UniqueFd take_channel() override;
  std::string stderr_tail() const override;  // the SSH channel's stderr
  // How the agent was found ("found on the host (/opt/hvrun/bin/hvrun-agent)", "copied to ~/.cache/...").
  const std::string& agent_description() const override { return description_; }
  std::optional<std::chrono::milliseconds> shell_time() const override { return shell_time_; }
  bool copies_files() const override { return true; }
  void copy_files(const std::vector<FileCopy>& files, std::chrono::milliseconds timeout,
                  const std::function<void(std::uint64_t)>& copied) override;

 private:
  RemoteAgent(SshSession session, SshExec exec, std::string description, std::chrono::milliseconds shell_time);
  SshSession session_;
  SshExec exec_;
  std::string description_;
  std::chrono::milliseconds shell_time_;
};

}  // namespace hvrun

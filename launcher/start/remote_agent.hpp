#pragma once
// The agent of a remote host: one SSH session to the host, and hvrun-agent running over one exec
// channel of it, bridged to a local socket that speaks the same protocol as a local agent.
//
// The agent binary is found, in this order: --agent-path; the absolute path of the launcher's own
// agent (shared file systems are the norm); `hvrun-agent` on the remote PATH; a copy that hvrun
// keeps in ~/.cache/hvrun/agent-<sha256>/ on the host (mode 0700, its hash checked before every run),
// uploaded over SFTP when missing or different.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "agent/wire/unique_fd.hpp"
#include "launcher/ssh/ssh_session.hpp"
#include "launcher/start/host_agent.hpp"

namespace hvrun {

struct RemoteAgentOptions {
  SshTarget ssh;                      // host, -p, -i, timeouts, strictness
  std::string agent_override;         // --agent-path; empty: search as above
  std::string local_agent;            // this machine's hvrun-agent (absolute path)
  std::chrono::milliseconds start_timeout{30'000};  // until the agent has said something
};

class RemoteAgent final : public HostAgent {
 public:
  // Connects and starts the agent; blocks (run it on a thread of its own). Returns once the agent has
  // written its first bytes. Throws SshError or Error, one line starting with the host.
  static std::unique_ptr<RemoteAgent> start(const RemoteAgentOptions& options);
  ~RemoteAgent() override;

  UniqueFd take_channel() override;
  std::string stderr_tail() const override;  // the SSH channel's stderr
  // How the agent was found ("/opt/hvrun/bin/hvrun-agent", "copied to ~/.cache/...").
  const std::string& agent_description() const override { return description_; }

 private:
  RemoteAgent(SshSession session, SshExec exec, std::string description);
  SshSession session_;
  SshExec exec_;
  std::string description_;
};

// Lowercase hex SHA-256 of a file's contents; throws SystemError naming the file.
std::string sha256_file(const std::string& path);

}  // namespace hvrun

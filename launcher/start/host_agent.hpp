#pragma once
// The agent of a host other than this machine, however it was started (SSH, a remote-shell command,
// srun): the job sees only its control channel and what to say when that channel ends badly.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/unique_fd.hpp"
#include "launcher/ssh/ssh_session.hpp"

namespace hvrun {

class HostAgent {
 public:
  virtual ~HostAgent() = default;
  // The control channel (the agent's stdin and stdout), handed over once.
  virtual UniqueFd take_channel() = 0;
  // The recent stderr of the agent and of whatever started it, for a message when its channel ends.
  virtual std::string stderr_tail() const = 0;
  // How the agent was found or started ("found on the host", "started by srun").
  virtual const std::string& agent_description() const = 0;
  // How long the host's login shell ran before the agent wrote its first bytes (from the exec request
  // on); nullopt where the start has no such step (--rsh-agent, srun).
  virtual std::optional<std::chrono::milliseconds> shell_time() const { return std::nullopt; }
  // Whether copy_files works: the agent came over hvrun's own SSH, whose SFTP carries the files.
  virtual bool copies_files() const { return false; }
  // Copies files to the host (--sync; SshSession::upload_files's contract, parents 0755 less the umask);
  // blocks, so run it on a thread of its own. Throws Error naming the host.
  virtual void copy_files(const std::vector<FileCopy>&, std::chrono::milliseconds,
                          const std::function<void(std::uint64_t)>&) {
    throw UsageError("--sync copies files over hvrun's own SSH, and this agent was " + agent_description() +
                     "; copy them there yourself, or drop --sync");
  }
};

}  // namespace hvrun

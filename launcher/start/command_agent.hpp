#pragma once
// The agent of a host reached by a local command rather than by hvrun's own SSH: `--rsh-agent CMD`
// (`CMD HOST /bin/sh`, as mpirun's plm_rsh_agent) and srun inside a Slurm allocation. The command runs
// here with the control channel on its stdin and stdout; it must pass both through untouched to the
// agent it starts on HOST, and end when the agent ends. The job's secret is sent on that channel,
// never in the command's argv or environment.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/byte_tail.hpp"
#include "common/child_process.hpp"
#include "common/unique_fd.hpp"
#include "launcher/start/host_agent.hpp"

namespace hvrun {

struct CommandAgentOptions {
  std::string host;                   // for messages
  std::vector<std::string> argv;      // run with execvp: the command that starts the agent on `host`
  std::string label;                  // how messages name the command ("--rsh-agent 'docker exec -i'")
  std::string fix;                    // what a user should check when it fails before the agent is up
  std::chrono::milliseconds start_timeout{30'000};  // until the agent has said something
  // Written to the command's stdin before anything else: the agent check script (agent_check.hpp) that
  // the `/bin/sh` the command runs reads; empty: none. `digest`: the SHA-256 that script expects, and
  // `missing`: what to say when it found no agent at all ("no executable hvrun-agent at PATH").
  std::string stdin_script;
  std::string digest;
  std::string missing;
};

class CommandAgent final : public HostAgent {
 public:
  // Starts the command, writes the check script, and waits until the agent has written its first bytes
  // (the script's report before them is read and logged); blocks (run it on a thread of its own). When
  // the script found no agent that passed its check, throws Error naming the host, each path and what
  // differs. The command runs in its own process group (Ctrl-C reaches only hvrun); if
  // hvrun dies, its stdin ends. Throws Error or TimeoutError, one line starting with the host.
  static std::unique_ptr<CommandAgent> start(const CommandAgentOptions& options);
  // Waits a moment for the command to end (it does once the channel is closed), then stops its
  // process group with SIGTERM and SIGKILL.
  ~CommandAgent() override;
  CommandAgent(const CommandAgent&) = delete;
  CommandAgent& operator=(const CommandAgent&) = delete;

  UniqueFd take_channel() override { return std::move(channel_); }
  std::string stderr_tail() const override;
  const std::string& agent_description() const override { return description_; }

 private:
  explicit CommandAgent(std::string description);
  void keep_stderr(UniqueFd err);
  // Waits up to `timeout` for the drain to reach the end of the command's stderr, so that a command
  // which wrote its reason and exited is quoted whole; a descendant holding the pipe open bounds it.
  void wait_stderr_end(std::chrono::milliseconds timeout);

  std::string description_;
  Child child_;
  UniqueFd channel_;
  // The command's stderr, drained by the launcher's I/O thread (launcher/base/io_thread.hpp) so it never
  // blocks on a full pipe; the last kStderrTailBytes are kept.
  class StderrDrain;
  mutable std::mutex tail_mutex_;
  ByteTail tail_;
  bool stderr_ended_ = false;  // the drain has seen EOF or an error (guarded by tail_mutex_)
  std::condition_variable stderr_end_;
  std::unique_ptr<StderrDrain> drain_;  // last: detached before the members it writes go
};

}  // namespace hvrun

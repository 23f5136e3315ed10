#pragma once
// The agent for a host that is this machine: the hvrun-agent binary beside hvrun, started over a
// socketpair (the same protocol as over SSH), in its own process group so that a Ctrl-C on the
// terminal reaches only hvrun, which then tears down in order.
#include <chrono>
#include <string>

#include "common/child_process.hpp"
#include "common/unique_fd.hpp"

namespace hvrun {

class LocalAgent {
 public:
  // Starts `agent_path`; the agent gets SIGTERM if hvrun dies (PR_SET_PDEATHSIG), and sees its
  // channel close, either of which makes it kill its ranks.
  explicit LocalAgent(const std::string& agent_path);
  // Kills the agent if it is still there (it exits by itself once its channel has closed) and reaps it.
  ~LocalAgent() = default;
  LocalAgent(const LocalAgent&) = delete;
  LocalAgent& operator=(const LocalAgent&) = delete;

  UniqueFd take_channel() { return std::move(channel_); }
  // Waits up to `timeout` for the agent to exit, then kills it; returns its exit code (128+N when
  // signal N ended it).
  int reap(std::chrono::milliseconds timeout);

 private:
  Child child_;
  UniqueFd channel_;  // after child_: closed first
};

// hvrun-agent in the directory of the running hvrun binary.
std::string default_agent_path();

}  // namespace hvrun

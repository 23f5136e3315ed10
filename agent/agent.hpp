#pragma once
// The per-host task agent: talks to the launcher over a framed control channel (its stdin/stdout),
// starts and supervises the ranks the launcher gives it, streams their output back, and kills every
// rank's process group when told to or when the launcher goes away.
#include <memory>

#include "common/unique_fd.hpp"

namespace hvrun {

class Agent {
 public:
  // `control_in`/`control_out`: the channel to the launcher (stdin/stdout of the agent process).
  Agent(UniqueFd control_in, UniqueFd control_out);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until the launcher says shutdown or the channel closes; every rank process group has been
  // killed when it returns. Returns the agent's exit code: 0 after a shutdown, 1 when the launcher
  // vanished or broke the protocol.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

#pragma once
// The job's phases and how it ends, without sockets or timers: which phase the job is in, the exit
// code, whether a failure was already reported (only the first is), and what a failure or a signal
// does next (stop the ranks with a grace period, shut the agents down, or give up on the output).
// The job (job.cpp) carries the decisions out; docs/DESIGN.md, "The teardown state machine".
//
//   kStarting -> kProbing -> [kRendezvous] -> kRunning     (start-up, advance())
//   kRunning -> kAutopsy                                   (the first SIGINT/SIGTERM, or --stall-timeout:
//                                                           begin_autopsy(): StacksRequestMsg, then a deadline)
//   kRunning -> kRestarting -> kRelaunching                (--max-restarts: a rank failed or a host was lost:
//     -> [kRendezvous] -> kRunning                          restart(): TerminateMsg; once every rank has
//                                                           ended, RestartMsg to every agent (advance()); the
//                                                           launch as at the start)
//   any phase before kShuttingDown -> kStopping            (stop_ranks(): TerminateMsg, then a deadline)
//   any phase before kShuttingDown -> kShuttingDown        (shut_down(): ShutdownMsg, then a deadline)
//   any phase -> kDone                                     (finish(): channels closed, output drained)
#include <chrono>
#include <string>

namespace hvrun {

class Teardown {
 public:
  // kRendezvous: NICs chosen, waiting for rank 0's agent to serve Horovod's rendezvous; no rank runs yet.
  // kAutopsy: the ranks still run while their stacks are collected, then they are stopped.
  // kRestarting: the failed attempt's ranks are being stopped, to start again (not a failure of the job).
  // kRelaunching: every rank of it has ended; the agents prepare the next attempt, and no rank runs.
  enum class Phase {
    kStarting,
    kProbing,
    kLinkTest,  // the NICs are chosen; their links are measured before the first rank starts
    kRendezvous,
    kRunning,
    kAutopsy,
    kRestarting,
    kRelaunching,
    kStopping,
    kShuttingDown,
    kDone
  };

  // What the job does next.
  enum class Action {
    kNothing,     // already tearing down
    kShutDown,    // no rank runs yet: the agents go at once
    kStopRanks,   // the ranks get SIGTERM, and SIGKILL after `grace`
    kAutopsy,     // every rank's stack is collected and printed, then kStopRanks with `grace`
    kDropOutput,  // a signal after the end: stop writing the ranks' output and exit
  };
  struct Decision {
    bool report = false;  // the first failure: the caller prints its line
    Action action = Action::kNothing;
    std::chrono::milliseconds grace{0};
  };

  // `kill_grace`: what --kill-grace gives the ranks between SIGTERM and SIGKILL.
  explicit Teardown(std::chrono::milliseconds kill_grace) : kill_grace_(kill_grace) {}

  Phase phase() const { return phase_; }
  // Start-up moves forward: kProbing, kLinkTest, kRendezvous, kRunning; a restart from kRestarting to kRelaunching.
  void advance(Phase to) { phase_ = to; }
  // kRunning -> kRestarting; false, changing nothing, in any other phase (a failure while the job
  // already stops or restarts starts nothing more).
  bool restart();
  // No rank was started yet, or (kRelaunching) none runs between two attempts.
  bool before_launch() const;
  // kShuttingDown or kDone: failures and stops change nothing any more.
  bool tearing_down() const { return phase_ == Phase::kShuttingDown || phase_ == Phase::kDone; }
  // What the job is doing, for an error's "while ..." ("probing the NICs").
  std::string activity() const;

  int exit_code() const { return exit_code_; }
  void set_exit_code(int code) { exit_code_ = code; }
  bool failure_reported() const { return failure_reported_; }
  // A failure the caller reports itself, with its own exit code (a usage error, a rank's failure).
  void record_failure(int exit_code);
  // The rest is hvrun's own output (the check report): no failure line follows it.
  void mark_reported() { failure_reported_ = true; }

  // The job cannot go on (a lost agent, a start-up timeout): exit code 1 for the first failure.
  Decision fail();
  // SIGINT or SIGTERM: exit code 128 + sig for the first, which while ranks run starts the autopsy; a
  // second signal (during the autopsy or while the ranks stop) stops them at once, without grace; a
  // signal after the end gives up on the output not yet written.
  Decision on_signal(int sig);
  // --stall-timeout passed while the ranks run: a failure (exit code 1) that starts the autopsy;
  // nothing in any other phase.
  Decision on_stall();
  // kRunning -> kAutopsy; false, changing nothing, in any other phase.
  bool begin_autopsy();

  // Each returns false, changing nothing, when the job is already tearing down.
  bool stop_ranks();
  bool shut_down();
  void finish() { phase_ = Phase::kDone; }

 private:
  std::chrono::milliseconds kill_grace_;
  Phase phase_ = Phase::kStarting;
  int exit_code_ = 0;
  bool failure_reported_ = false;
  int interrupts_ = 0;
};

}  // namespace hvrun

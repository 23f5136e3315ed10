#pragma once
// What the agent does on each message from the launcher, and when the launcher goes, without sockets,
// timers or processes: which messages the current phase accepts (a refusal is a ProtocolError, which
// ends the channel), what happens to the ranks' process groups, how the agent ends and with which exit
// code. The agent (agent.cpp) does the message's own work (the store, the probes, the spawns) and
// carries the decisions out. docs/DESIGN.md §3.2 and §6.2.
//
//   kAwaitingJob -> kJobKnown   (job: the secret, the heartbeat period, the store; refused a second time)
//   kJobKnown    -> kLaunched   (launch: the ranks start; refused before the job, and a second time
//                                unless the job is Horovod elastic's, whose launches each add workers)
//   kLaunched    -> kJobKnown   (restart, --max-restarts: every rank has exited; the next launch and a
//                                new Horovod rendezvous request are accepted again)
//   any phase    -> kDone       (finish(): the channel is closed and the loop stops)
// The fingerprint request and the sync check are accepted after the job and before the launch.
// Heartbeats, acks, terminate and shutdown are accepted in every phase; probe requests and the Horovod
// rendezvous request and the stacks request from the job on, the rendezvous only while none is served. Every other message
// type is the launcher's to receive, never the agent's: refused.
#include <chrono>
#include <optional>

#include "common/control_message.hpp"

namespace hvrun {

class AgentState {
 public:
  enum class Phase { kAwaitingJob, kJobKnown, kLaunched, kDone };

  // How the agent ends after a decision.
  enum class End {
    kNone,        // it goes on
    kAfterFlush,  // once the channel has written everything queued (the last exits reach the launcher)
    kNow,         // at once: nobody is left to read what is queued
  };
  // What the agent does to every rank's process group and to itself.
  struct Decision {
    int signal = 0;                                       // sent to every group at once; 0: none
    std::optional<std::chrono::milliseconds> kill_after;  // then SIGKILL to every group after this
    End end = End::kNone;
  };

  Phase phase() const { return phase_; }
  bool finished() const { return phase_ == Phase::kDone; }
  // 1 until a shutdown makes it 0; the launcher going away makes it 1 again.
  int exit_code() const { return exit_code_; }

  // Checks `msg` against the phase and moves the phase on. Throws ProtocolError ("launcher: ...") for
  // a message the launcher must not send now, or never sends. Terminate: SIGTERM now, SIGKILL after the
  // grace. Shutdown: SIGKILL now, exit code 0, the end after the flush. Every other message: nothing
  // to the ranks (its own work is the caller's).
  Decision on_message(const ControlMessage& msg);
  // The Horovod rendezvous server listens: a second request is refused from now on. One that failed
  // to listen (the launcher was told, FatalMsg) leaves the request open.
  void serving_horovod_rendezvous() { serving_rendezvous_ = true; }
  // The channel closed or broke, a protocol error, the watchdog, or a stop signal to the agent: SIGKILL
  // to every group and the end at once, exit code 1. Nothing once finished. `report`: the caller logs
  // why the launcher is gone.
  struct Gone {
    bool report = false;
    Decision decision;
  };
  Gone on_launcher_gone();
  // The agent has ended (End::kNow, or the flush of End::kAfterFlush done). Results that arrive later,
  // such as a probe's, are dropped.
  void finish() { phase_ = Phase::kDone; }

 private:
  Phase phase_ = Phase::kAwaitingJob;
  bool serving_rendezvous_ = false;
  bool elastic_ = false;  // JobMsg::elastic
  int exit_code_ = 1;
};

}  // namespace hvrun

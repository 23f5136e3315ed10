#pragma once
// The Horovod elastic driver's state machine as data (ElasticJob, launcher/job/elastic_job.cpp; docs/
// DESIGN.md 6.9): its phases, the moves between them, and what each event does in each phase, without
// sockets or timers. The driver asks `on(event)` and carries the action out; the parts of an event that
// do not depend on the phase (a blacklisted host's rank_and_size answered "-1,..." at once, say) stay in
// the driver. DESIGN.md's table is `markdown_table()`'s text (tests/test_elastic_phase.cpp checks it).
//
//   kWaiting -> kOpen                      (the first --np slots are usable: the first world starts)
//   kOpen -> kForming -> kOpen             (a new world with new workers: the old ones are held until the new
//                                           ones reach Gloo's rendezvous, then answered)
//   kOpen -> kResuming -> kOpen            (a reset left fewer than --min-np slots: wait for more)
//   any of those -> kStopping -> kDone     (success, failure or signal: the workers stop, then the agents go)
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace hvrun {

class ElasticPhase {
 public:
  enum class Phase {
    kWaiting,   // before the first world: hosts start, are probed and knock until --np slots are usable
    kOpen,      // a world runs; its round ends when every worker recorded READY, SUCCESS or FAILURE
    kForming,   // kOpen, with the old world's rank_and_size answers held while the new workers start
    kResuming,  // a round ended in a reset with fewer than --min-np usable slots: waiting for more
    kStopping,  // the workers are being stopped (TerminateMsg); the job's exit code is settled
    kDone,      // the agents are told to go; the rendezvous is closed
  };
  static constexpr std::size_t kPhases = 6;

  enum class Event {
    kDiscovered,           // the discovery script's output (or the -H hosts, once)
    kDiscoveryFailed,      // a run of the discovery script after the first failed
    kFirstDiscoveryFailed, // its first run failed
    kHostSetChanged,       // the usable hosts may differ: a discovery, an admission, a refusal, a blacklisting
    kRankAndSize,          // a worker's GET /rank_and_size (it re-initialises), from a host not blacklisted
    kWorkerExited,         // an agent's ExitedMsg
    kAgentLost,            // a host's agent went away (heartbeat, SSH, its FatalMsg)
    kRankPublished,        // PUT /global/RANK: a worker began Gloo's rendezvous
    kRoundEnded,           // the registry says the round is complete
    kLateGraceOver,        // kLateGrace after a failure, with workers still silent
    kFormingTimeout,       // kFormingTimeout while forming
    kReplaceTimeout,       // kReplaceAfter after a round ended without workers still silent (`late`)
    kSlotsTimeout,         // --elastic-timeout while too few slots are usable
    kSignal,               // SIGINT or SIGTERM
  };
  static constexpr std::size_t kEvents = 14;

  enum class Action {
    kIgnore,             // nothing (the event cannot matter in this phase)
    kAddHosts,           // pool.update; an agent for each new host, afresh for one back after its cooldown
    kWarn,               // a warning; the job goes on as it was
    kFail,               // the job fails (exit 1): kStopping
    kMaybeStart,         // start the first world when --np slots are usable and no host is still joining
    kNotifyCoordinator,  // if the assignment would change, tell the coordinator (HostsUpdatedRequest)
    kMaybeResume,        // go on when --min-np slots are usable
    kHold,               // keep the answer for the round's end; record READY
    kAnswerUnassigned,   // answer "-1,-1,-1,-1,-1,-1" at once
    kRecord,             // record the worker's SUCCESS or FAILURE (a lost host's: FAILURE) in the round
    kEndFormingRecord,   // on a failure, the held workers count as READY (forming ends), then kRecord
    kMaybeFinish,        // once no worker runs: kDone
    kPollClosed,         // once every agent is gone: the loop ends
    kReleaseIfLast,      // the last new worker to publish releases the held answers: kOpen
    kNoteReplacement,    // a replacement worker began the rendezvous: the job goes on once all have
    kReplaceSilent,      // each `late` worker still silent is killed (TerminateMsg::ranks) and started afresh
    kRelease,            // release the held answers anyway, naming the slots that did not come: kOpen
    kEndRound,           // kReset: blacklist, then activate (kOpen or kForming) or kResuming; else kStopping
    kEndRoundEarly,      // the still silent workers count as READY (`late`), which may end the round
    kStopAll,            // TerminateMsg to every worker (--kill-grace), exit 128 + signal: kStopping
    kFinishNow,          // a second signal: the agents go at once, the workers with them: kDone
  };

  Phase phase() const { return phase_; }
  // What `event` does in the current phase (kTable).
  Action on(Event event) const;
  // Moves to `to`; a move not in kMoves is hvrun's bug (an invariant failure). Moving to the current phase
  // changes nothing.
  void move_to(Phase to);
  // kStopping or kDone.
  bool stopping() const { return phase_ == Phase::kStopping || phase_ == Phase::kDone; }
  // Past kWaiting: a world was started, or the job stops before one was.
  bool started() const { return phase_ != Phase::kWaiting; }

  static std::string_view name(Phase p);
  static std::string_view name(Event e);
  static std::string_view name(Action a);
  static bool allowed(Phase from, Phase to);
  // The table as DESIGN.md shows it: a row per event, a column per phase, then a line per action.
  static std::string markdown_table();

 private:
  Phase phase_ = Phase::kWaiting;
};

}  // namespace hvrun

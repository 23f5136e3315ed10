#pragma once
// One host's life in a job as a typed state machine, without sockets or timers: one enum of phases and
// every move between them in one place (host_life.cpp's kMoves). Both drivers, the fixed job and the
// Horovod elastic one (docs/DESIGN.md 6.1, 6.9), move their hosts through it; a move not in the list is
// hvrun's bug (InternalError). What an agent sends out of turn is the driver's to refuse (ProtocolError)
// before it asks for the move. What the host said (its hello, its fingerprint) is data beside it
// (JobHost); the phase alone says where the host is.
//
//   kStarting -> kAttached -> kGreeted -> [kSyncChecking -> [kSyncing] ->] [kFingerprinting ->] kUp
//   kStarting -> kStartFailed                   (SSH or the agent's start failed: JobHost::connect_error)
//   kUp -> kKnocking -> kAdmitted               (Horovod elastic: its NIC chosen, its agent knocks)
//   kStartFailed, kSyncing, kUp, kKnocking -> kRefused (Horovod elastic only: a fixed job refuses no host)
//   any phase but kStartFailed, kRefused -> kLost (its agent went away, or arrived after the start-up)
#include <cstddef>
#include <string_view>

namespace hvrun {

enum class HostPhase {
  kStarting,        // its agent is being started (a child here, SSH, --rsh-agent)
  kStartFailed,     // it could not be (final)
  kAttached,        // its channel is attached; its hello is awaited
  kGreeted,         // its hello came (version checked); its ready is awaited
  kSyncChecking,    // ready; --sync: it was asked which files it lacks
  kSyncing,         // --sync: the files it lacks are being copied
  kFingerprinting,  // ready, with --sync's files: what its ranks would run is awaited
  kUp,              // ready, synced, fingerprinted (or the job has no command): it can run ranks
  kKnocking,        // elastic: probed, its agent knocking on the rendezvous
  kAdmitted,        // elastic: it runs workers
  kRefused,         // elastic: left out for good (final)
  kLost,            // its agent went away (final)
};

class HostLife {
 public:
  static constexpr std::size_t kPhases = 12;

  HostPhase phase() const { return phase_; }

  // The moves; each is an invariant failure from a phase not listed.
  void attach();      // kStarting -> kAttached
  void fail_start();  // kStarting -> kStartFailed
  void greet();       // kAttached -> kGreeted
  // kGreeted -> kSyncChecking when `needs_sync`, else kFingerprinting when `wants_fingerprint`, else kUp.
  void ready(bool needs_sync, bool wants_fingerprint);
  void start_copy();  // kSyncChecking -> kSyncing
  // kSyncChecking or kSyncing -> kFingerprinting when `wants_fingerprint`, else kUp.
  void synced(bool wants_fingerprint);
  void fingerprinted();  // kFingerprinting -> kUp
  void knock();          // kUp -> kKnocking
  void admit();          // kKnocking -> kAdmitted
  void refuse();         // kStartFailed, kSyncing, kUp or kKnocking -> kRefused
  void lose();           // any phase but a final one -> kLost

  bool starting() const { return phase_ == HostPhase::kStarting; }
  bool start_failed() const { return phase_ == HostPhase::kStartFailed; }
  // Its hello came and it was not lost or refused since.
  bool greeted() const;
  // Its agent said ready and is still there (kSyncChecking to kAdmitted).
  bool ready() const;
  // Ready, and its --sync check, copies or fingerprint still awaited.
  bool settling() const;
  // --sync: its check or its copies are under way.
  bool syncing() const { return phase_ == HostPhase::kSyncChecking || phase_ == HostPhase::kSyncing; }
  // kStartFailed, kRefused or kLost: it never moves again.
  bool ended() const;

  static bool allowed(HostPhase from, HostPhase to);
  static std::string_view name(HostPhase p);

 private:
  void move(HostPhase to);

  HostPhase phase_ = HostPhase::kStarting;
};

}  // namespace hvrun

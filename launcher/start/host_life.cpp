#include "launcher/start/host_life.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "common/invariant.hpp"

namespace hvrun {
namespace {

using P = HostPhase;

// Every move a host makes; nothing else is allowed (staying put included).
constexpr std::array<std::pair<P, P>, 27> kMoves{{
    {P::kStarting, P::kAttached},
    {P::kStarting, P::kStartFailed},
    {P::kStarting, P::kLost},
    {P::kAttached, P::kGreeted},
    {P::kAttached, P::kLost},
    {P::kGreeted, P::kSyncChecking},
    {P::kGreeted, P::kFingerprinting},
    {P::kGreeted, P::kUp},
    {P::kGreeted, P::kLost},
    {P::kSyncChecking, P::kSyncing},
    {P::kSyncChecking, P::kFingerprinting},
    {P::kSyncChecking, P::kUp},
    {P::kSyncChecking, P::kLost},
    {P::kSyncing, P::kFingerprinting},
    {P::kSyncing, P::kUp},
    {P::kSyncing, P::kLost},
    {P::kFingerprinting, P::kUp},
    {P::kFingerprinting, P::kLost},
    {P::kUp, P::kKnocking},
    {P::kUp, P::kRefused},
    {P::kUp, P::kLost},
    {P::kKnocking, P::kAdmitted},
    {P::kKnocking, P::kRefused},
    {P::kKnocking, P::kLost},
    {P::kAdmitted, P::kLost},
    {P::kStartFailed, P::kRefused},
    {P::kSyncing, P::kRefused},  // elastic: a newcomer whose --sync copies failed
}};

}  // namespace

bool HostLife::allowed(HostPhase from, HostPhase to) {
  return std::find(kMoves.begin(), kMoves.end(), std::pair{from, to}) != kMoves.end();
}

void HostLife::move(HostPhase to) {
  HVRUN_INVARIANT_MSG(allowed(phase_, to),
                      "host life: no move from " + std::string(name(phase_)) + " to " + std::string(name(to)));
  phase_ = to;
}

void HostLife::attach() { move(P::kAttached); }
void HostLife::fail_start() { move(P::kStartFailed); }
void HostLife::greet() { move(P::kGreeted); }

void HostLife::ready(bool needs_sync, bool wants_fingerprint) {
  HVRUN_INVARIANT_MSG(phase_ == P::kGreeted, "host life: ready in " + std::string(name(phase_)));
  move(needs_sync ? P::kSyncChecking : wants_fingerprint ? P::kFingerprinting : P::kUp);
}

void HostLife::start_copy() { move(P::kSyncing); }

void HostLife::synced(bool wants_fingerprint) {
  HVRUN_INVARIANT_MSG(syncing(), "host life: synced in " + std::string(name(phase_)));
  move(wants_fingerprint ? P::kFingerprinting : P::kUp);
}

void HostLife::fingerprinted() {
  HVRUN_INVARIANT_MSG(phase_ == P::kFingerprinting, "host life: fingerprinted in " + std::string(name(phase_)));
  move(P::kUp);
}
void HostLife::knock() { move(P::kKnocking); }
void HostLife::admit() { move(P::kAdmitted); }
void HostLife::refuse() { move(P::kRefused); }
void HostLife::lose() { move(P::kLost); }

bool HostLife::greeted() const {
  return phase_ != P::kStarting && phase_ != P::kStartFailed && phase_ != P::kAttached && !ended();
}

bool HostLife::ready() const { return greeted() && phase_ != P::kGreeted; }

bool HostLife::settling() const { return syncing() || phase_ == P::kFingerprinting; }

bool HostLife::ended() const { return phase_ == P::kStartFailed || phase_ == P::kRefused || phase_ == P::kLost; }

std::string_view HostLife::name(HostPhase p) {
  switch (p) {
    case P::kStarting: return "kStarting";
    case P::kStartFailed: return "kStartFailed";
    case P::kAttached: return "kAttached";
    case P::kGreeted: return "kGreeted";
    case P::kSyncChecking: return "kSyncChecking";
    case P::kSyncing: return "kSyncing";
    case P::kFingerprinting: return "kFingerprinting";
    case P::kUp: return "kUp";
    case P::kKnocking: return "kKnocking";
    case P::kAdmitted: return "kAdmitted";
    case P::kRefused: return "kRefused";
    case P::kLost: return "kLost";
  }
  return "?";
}

}  // namespace hvrun

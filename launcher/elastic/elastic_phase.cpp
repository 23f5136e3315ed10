#include "launcher/elastic/elastic_phase.hpp"

#include <algorithm>
#include <utility>

#include "common/invariant.hpp"

namespace hvrun {
namespace {

using Phase = ElasticPhase::Phase;
using Event = ElasticPhase::Event;
using Action = ElasticPhase::Action;
using A = ElasticPhase::Action;

// kTable[event][phase]; columns: kWaiting, kOpen, kForming, kResuming, kStopping, kDone.
constexpr std::array<std::array<Action, ElasticPhase::kPhases>, ElasticPhase::kEvents> kTable{{
    /* kDiscovered */ {A::kAddHosts, A::kAddHosts, A::kAddHosts, A::kAddHosts, A::kIgnore, A::kIgnore},
    /* kDiscoveryFailed */ {A::kWarn, A::kWarn, A::kWarn, A::kWarn, A::kIgnore, A::kIgnore},
    /* kFirstDiscoveryFailed */ {A::kFail, A::kFail, A::kFail, A::kFail, A::kIgnore, A::kIgnore},
    /* kHostSetChanged */
    {A::kMaybeStart, A::kNotifyCoordinator, A::kNotifyCoordinator, A::kMaybeResume, A::kIgnore, A::kIgnore},
    // Before the first world no worker exists to ask; stopping, a held answer would never go out.
    /* kRankAndSize */ {A::kAnswerUnassigned, A::kHold, A::kHold, A::kHold, A::kAnswerUnassigned, A::kAnswerUnassigned},
    /* kWorkerExited */ {A::kRecord, A::kRecord, A::kEndFormingRecord, A::kRecord, A::kMaybeFinish, A::kMaybeFinish},
    /* kAgentLost */ {A::kRecord, A::kRecord, A::kEndFormingRecord, A::kRecord, A::kMaybeFinish, A::kPollClosed},
    /* kRankPublished */ {A::kIgnore, A::kNoteReplacement, A::kReleaseIfLast, A::kIgnore, A::kIgnore, A::kIgnore},
    /* kRoundEnded */ {A::kIgnore, A::kEndRound, A::kEndRound, A::kEndRound, A::kIgnore, A::kIgnore},
    /* kLateGraceOver */ {A::kIgnore, A::kEndRoundEarly, A::kEndRoundEarly, A::kIgnore, A::kIgnore, A::kIgnore},
    /* kFormingTimeout */ {A::kIgnore, A::kIgnore, A::kRelease, A::kIgnore, A::kIgnore, A::kIgnore},
    // Waiting after a reset, the silent worker's slot may not be in the next world: left to Gloo's timeout.
    /* kReplaceTimeout */ {A::kIgnore, A::kReplaceSilent, A::kReplaceSilent, A::kIgnore, A::kIgnore, A::kIgnore},
    /* kSlotsTimeout */ {A::kFail, A::kIgnore, A::kIgnore, A::kFail, A::kIgnore, A::kIgnore},
    /* kSignal */ {A::kStopAll, A::kStopAll, A::kStopAll, A::kStopAll, A::kFinishNow, A::kFinishNow},
}};

// Besides these, staying put and kStopping -> kDone (allowed()).
constexpr std::array<std::pair<Phase, Phase>, 9> kMoves{{
    {Phase::kWaiting, Phase::kOpen},
    {Phase::kOpen, Phase::kForming},
    {Phase::kForming, Phase::kOpen},
    {Phase::kOpen, Phase::kResuming},
    {Phase::kResuming, Phase::kOpen},
    {Phase::kWaiting, Phase::kStopping},
    {Phase::kOpen, Phase::kStopping},
    {Phase::kForming, Phase::kStopping},
    {Phase::kResuming, Phase::kStopping},
}};

constexpr std::array<Phase, ElasticPhase::kPhases> kAllPhases{Phase::kWaiting,  Phase::kOpen,     Phase::kForming,
                                                              Phase::kResuming, Phase::kStopping, Phase::kDone};

}  // namespace

ElasticPhase::Action ElasticPhase::on(Event event) const {
  return kTable.at(static_cast<std::size_t>(event)).at(static_cast<std::size_t>(phase_));
}

bool ElasticPhase::allowed(Phase from, Phase to) {
  if (from == to || (from == Phase::kStopping && to == Phase::kDone)) return true;
  return std::find(kMoves.begin(), kMoves.end(), std::pair{from, to}) != kMoves.end();
}

void ElasticPhase::move_to(Phase to) {
  HVRUN_INVARIANT_MSG(allowed(phase_, to), "elastic driver: no move from " + std::string(name(phase_)) + " to " +
                                               std::string(name(to)));
  phase_ = to;
}

std::string_view ElasticPhase::name(Phase p) {
  switch (p) {
    case Phase::kWaiting: return "kWaiting";
    case Phase::kOpen: return "kOpen";
    case Phase::kForming: return "kForming";
    case Phase::kResuming: return "kResuming";
    case Phase::kStopping: return "kStopping";
    case Phase::kDone: return "kDone";
  }
  return "?";
}

std::string_view ElasticPhase::name(Event e) {
  switch (e) {
    case Event::kDiscovered: return "kDiscovered";
    case Event::kDiscoveryFailed: return "kDiscoveryFailed";
    case Event::kFirstDiscoveryFailed: return "kFirstDiscoveryFailed";
    case Event::kHostSetChanged: return "kHostSetChanged";
    case Event::kRankAndSize: return "kRankAndSize";
    case Event::kWorkerExited: return "kWorkerExited";
    case Event::kAgentLost: return "kAgentLost";
    case Event::kRankPublished: return "kRankPublished";
    case Event::kRoundEnded: return "kRoundEnded";
    case Event::kLateGraceOver: return "kLateGraceOver";
    case Event::kFormingTimeout: return "kFormingTimeout";
    case Event::kReplaceTimeout: return "kReplaceTimeout";
    case Event::kSlotsTimeout: return "kSlotsTimeout";
    case Event::kSignal: return "kSignal";
  }
  return "?";
}

std::string_view ElasticPhase::name(Action a) {
  switch (a) {
    case Action::kIgnore: return "kIgnore";
    case Action::kAddHosts: return "kAddHosts";
    case Action::kWarn: return "kWarn";
    case Action::kFail: return "kFail";
    case Action::kMaybeStart: return "kMaybeStart";
    case Action::kNotifyCoordinator: return "kNotifyCoordinator";
    case Action::kMaybeResume: return "kMaybeResume";
    case Action::kHold: return "kHold";
    case Action::kAnswerUnassigned: return "kAnswerUnassigned";
    case Action::kRecord: return "kRecord";
    case Action::kEndFormingRecord: return "kEndFormingRecord";
    case Action::kMaybeFinish: return "kMaybeFinish";
    case Action::kPollClosed: return "kPollClosed";
    case Action::kReleaseIfLast: return "kReleaseIfLast";
    case Action::kNoteReplacement: return "kNoteReplacement";
    case Action::kReplaceSilent: return "kReplaceSilent";
    case Action::kRelease: return "kRelease";
    case Action::kEndRound: return "kEndRound";
    case Action::kEndRoundEarly: return "kEndRoundEarly";
    case Action::kStopAll: return "kStopAll";
    case Action::kFinishNow: return "kFinishNow";
  }
  return "?";
}

std::string ElasticPhase::markdown_table() {
  std::string out = "| event |";
  for (Phase p : kAllPhases) out += " `" + std::string(name(p)) + "` |";
  out += "\n|---|";
  for (std::size_t i = 0; i < kPhases; ++i) out += "---|";
  out += "\n";
  for (std::size_t e = 0; e < kEvents; ++e) {
    out += "| `" + std::string(name(static_cast<Event>(e))) + "` |";
    for (std::size_t p = 0; p < kPhases; ++p) {
      const Action a = kTable[e][p];
      out += a == Action::kIgnore ? std::string(" — |") : " `" + std::string(name(a)) + "` |";
    }
    out += "\n";
  }
  out += "\nMoves:";
  for (const auto& [from, to] : kMoves) out += " `" + std::string(name(from)) + "` → `" + std::string(name(to)) + "`;";
  out += " `kStopping` → `kDone`.\n";
  return out;
}

}  // namespace hvrun

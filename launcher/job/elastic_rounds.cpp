#include "launcher/job/elastic_rounds.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/log.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/job/rank_exits.hpp"

namespace hvrun {

using std::chrono::milliseconds;

namespace {

constexpr const char* kUnassigned = "-1,-1,-1,-1,-1,-1";
// How long the workers of the old world stay held (their rank_and_size unanswered) while the new world's
// new workers start and reach Gloo's rendezvous (forming, in activate()); then they are answered anyway.
// Python and torch's import take seconds on a loaded host.
constexpr milliseconds kFormingTimeout{60000};

}  // namespace

ElasticRounds::ElasticRounds(boost::asio::io_context& io, const LaunchOptions& options, ElasticPhase& phase,
                             const ElasticHosts& pool, ElasticAdmission& admission, ElasticWorkers& workers,
                             AgentLinks& links, Hooks hooks)
    : options_(options),
      el_(*options.elastic),
      phase_(phase),
      pool_(pool),
      admission_(admission),
      workers_(workers),
      hooks_(std::move(hooks)),
      registry_(el_.reset_limit),
      notice_(io),
      late_(io, links, workers),
      slots_timer_(io),
      forming_timer_(io) {}

HorovodElasticHooks ElasticRounds::rendezvous_hooks() {
  return HorovodElasticHooks{
      .rank_and_size = [this](const std::string& host, int lr,
                              std::function<void(std::string)> answer) { on_rank_and_size(host, lr, std::move(answer)); },
      .worker_addresses = [this](const std::string& host, int lr,
                                 HorovodWorkerAddresses a) { notice_.address({host, lr}, std::move(a)); },
      .global_rank_published = [this](int rank) { on_rank_published(rank); }};
}

void ElasticRounds::host_set_changed(HorovodHostUpdate update) {
  switch (phase_.on(Event::kHostSetChanged)) {
    case Action::kMaybeStart: return maybe_start();
    case Action::kMaybeResume: return maybe_resume();
    case Action::kNotifyCoordinator: break;
    default: return;
  }
  const auto hs = admission_.usable_hosts();
  if (slot_count(hs) < el_.min_np) return;  // Horovod's driver sends nothing then
  if (assign_slots(hs, el_.max_np) == assignment_) return;
  notify_coordinator(update);
}

// horovodrun's _notify_workers_host_changes: the coordinator (rank 0) hears of it (HostChangeNotice).
void ElasticRounds::notify_coordinator(HorovodHostUpdate update) {
  const auto coordinator =
      std::find_if(assignment_.begin(), assignment_.end(), [](const SlotInfo& s) { return s.rank == 0; });
  if (coordinator == assignment_.end()) return;
  const bool told = notice_.tell({coordinator->host, coordinator->local_rank}, update, [this, update] {
    if (assign_slots(admission_.usable_hosts(), el_.max_np) == assignment_) return;
    log_of(LogSubsys::kRendezvous).info("the hosts still differ from the world's: telling the coordinator again");
    host_set_changed(update);
  });
  if (told) note_change("the host change");
}

void ElasticRounds::note_change(const std::string& what) {
  if (change_at_) return;
  change_at_ = Clock::now();
  change_what_ = what;
}

void ElasticRounds::maybe_start() {
  if (phase_.phase() != Phase::kWaiting) return;
  const auto hs = admission_.usable_hosts();
  if (slot_count(hs) < options_.np) return;
  // Hosts still starting or being probed join first, unless the job is full without them.
  if (admission_.admitting() && !(el_.max_np && slot_count(hs) >= *el_.max_np)) return;
  slots_timer_.cancel();
  activate(hs);
  if (phase_.stopping()) return;
  spdlog::warn("elastic: started {} ranks on {}", assignment_.size(), fold_names(assignment_hosts(assignment_)));
  hooks_.started();
}

void ElasticRounds::maybe_resume() {
  const auto hs = admission_.usable_hosts();
  if (slot_count(hs) < el_.min_np) return;
  slots_timer_.cancel();
  activate(hs);
}

// driver.py _activate_workers: a new assignment, a new round, the held answers, and workers for the
// slots that have none.
void ElasticRounds::activate(const std::vector<HostSlots>& hs) {
  std::vector<SlotInfo> next = assign_slots(hs, el_.max_np);
  const std::vector<std::string> before = assignment_hosts(assignment_), after = assignment_hosts(next);
  if (!assignment_.empty() && std::none_of(before.begin(), before.end(), [&](const std::string& h) {
        return std::find(after.begin(), after.end(), h) != after.end();
      }))
    return hooks_.fail("no host of the last world is left (" + fold_names(before) +
                       "), so no worker can hand the training state on; the job cannot go on");
  const bool first = assignment_.empty();
  end_forming();
  late_.clear_replacements();
  notice_.cancel();  // the change is in this world, or told again when the hosts change next
  phase_.move_to(Phase::kOpen);
  assignment_ = std::move(next);
  registry_.reset(static_cast<int>(assignment_.size()));
  admission_.new_world();
  for (const std::string& h : after)
    if (!first && std::find(before.begin(), before.end(), h) == before.end())
      spdlog::warn("{} joined: {} ranks now", h, assignment_.size());
  const auto started_ranks = workers_.start(assignment_);
  if (!started_ranks) return hooks_.fail(ElasticWorkers::bound_text());
  if (phase_.stopping()) return;
  // The old world's workers wait in rank_and_size. Answered now, they would begin Gloo's rendezvous at
  // once and wait there for the new workers, which are still starting (Python, torch: seconds); a new
  // host lost meanwhile would leave them stuck until Gloo's timeout (30 s), then aborting, and the job
  // with them (so under horovodrun). Held until every new worker has begun the rendezvous (forming),
  // they can still be given another world if one is lost: a failure during forming ends the round
  // (record_held_ready), and the next activation answers them.
  if (!held_.empty() && !started_ranks->empty()) {
    forming_.insert(started_ranks->begin(), started_ranks->end());
    phase_.move_to(Phase::kForming);
    log_of(LogSubsys::kRendezvous)
        .info("holding the {} workers of the last world until the {} new ones reach the rendezvous", held_.size(),
              forming_.size());
    forming_timer_.expires_after(kFormingTimeout);
    forming_timer_.async_wait([this, round = registry_.round()](auto ec) {
      if (ec || registry_.round() != round || phase_.on(Event::kFormingTimeout) != Action::kRelease) return;
      spdlog::warn("elastic: {} new workers ({}) did not reach the rendezvous within {}; the others go ahead and "
                   "wait for them in Gloo's rendezvous. Check those hosts' start-up: the program's imports, its "
                   "Python environment, a slow or full disk",
                   forming_.size(), forming_slots_text(), seconds_text(kFormingTimeout));
      release_held();
    });
    return;
  }
  release_held();
}

// The new workers that have not begun the rendezvous, by slot ("host[local rank]").
std::string ElasticRounds::forming_slots_text() const {
  std::vector<std::string> slots;
  for (const SlotInfo& s : assignment_)
    if (forming_.contains(s.rank)) slots.push_back(slot_text({s.host, s.local_rank}));
  return fold_names(slots);
}

void ElasticRounds::end_forming() {
  forming_.clear();
  forming_timer_.cancel();
  if (phase_.phase() == Phase::kForming) phase_.move_to(Phase::kOpen);
}

// The new world's held answers go out (activate()).
void ElasticRounds::release_held() {
  end_forming();
  auto answers = std::move(held_);
  held_.clear();
  for (auto& [key, answer] : answers) {
    late_.forget_late(key);  // it was waiting, not silent
    answer(slot_of(key) ? slot_of(key)->response() : kUnassigned);
  }
  maybe_report_resumed();
}

void ElasticRounds::on_rank_published(int rank) {
  const Action action = phase_.on(Event::kRankPublished);
  if (action == Action::kNoteReplacement && late_.replacement_began(rank)) return maybe_report_resumed();
  if (action != Action::kReleaseIfLast || forming_.erase(rank) == 0) return;
  log_of(LogSubsys::kRendezvous).debug("rank {} of the new world reached the rendezvous", rank);
  if (forming_.empty()) release_held();
}

// A worker failed or its host was lost while the old world's workers were held for the new ones
// (forming): the held ones count as READY in this round, which they are (waiting in rank_and_size),
// so the failure can end the round at once; those of `failing_host` are left to the failure's own
// record. Returns the round's end when that completed it.
std::optional<RoundEnd> ElasticRounds::record_held_ready(const std::string& failing_host) {
  if (forming_.empty()) return std::nullopt;
  end_forming();
  for (const auto& [key, answer] : held_) {
    if (key.first == failing_host || !slot_of(key) || registry_.has_recorded(key.first, key.second)) continue;
    if (auto end = registry_.record(key.first, key.second, WorkerState::kReady, false)) return end;
  }
  return std::nullopt;
}

// Once every worker of the new world has its answer (or is new), the line that says the job goes on,
// and how long after the change that began it.
void ElasticRounds::maybe_report_resumed() {
  if (!change_at_ || !late_.settled()) return;
  if (std::any_of(assignment_.begin(), assignment_.end(),
                  [this](const SlotInfo& s) { return late_.late({s.host, s.local_rank}); }))
    return;
  spdlog::warn("elastic: {} ranks on {}, {} after {}", assignment_.size(), fold_names(assignment_hosts(assignment_)),
               seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - *change_at_)), change_what_);
  change_at_.reset();
}

std::optional<SlotInfo> ElasticRounds::slot_of(const SlotKey& k) const {
  if (pool_.blacklisted(k.first)) return std::nullopt;
  for (const SlotInfo& s : assignment_)
    if (s.host == k.first && s.local_rank == k.second) return s;
  return std::nullopt;
}

void ElasticRounds::on_rank_and_size(const std::string& host, int lr, std::function<void(std::string)> answer) {
  if (phase_.on(Event::kRankAndSize) == Action::kAnswerUnassigned || !admission_.knows(host))
    return answer(kUnassigned);
  const bool out = pool_.blacklisted(host);
  if (out || late_.replacing({host, lr})) return answer(kUnassigned);  // replacing: being killed
  if (late_.forget_late({host, lr})) {
    const auto slot = slot_of({host, lr});
    log_of(LogSubsys::kRendezvous).info("{} re-initialises after its round ended; answered at once", slot_text({host, lr}));
    answer(slot ? slot->response() : kUnassigned);
    return maybe_report_resumed();
  }
  held_.emplace_back(SlotKey{host, lr}, std::move(answer));
  log_of(LogSubsys::kRendezvous).debug("{} is ready ({} of {})", slot_text({host, lr}), registry_.recorded() + 1, registry_.size());
  if (auto end = registry_.record(host, lr, WorkerState::kReady, out)) on_round_end(*end);
}

void ElasticRounds::on_round_end(const RoundEnd& end) {
  if (phase_.on(Event::kRoundEnded) != Action::kEndRound) return;
  switch (end.kind) {
    case RoundEnd::Kind::kReset: {
      end_forming();  // the held answers go out with the next world
      for (const std::string& h : end.blacklist) admission_.blacklist(h);
      const auto hs = admission_.usable_hosts();
      if (slot_count(hs) < el_.min_np) {
        phase_.move_to(Phase::kResuming);
        spdlog::warn("elastic: {} slots left, --min-np is {}; waiting up to {} for more (--elastic-timeout)",
                     slot_count(hs), el_.min_np, seconds_text(std::chrono::duration_cast<milliseconds>(el_.timeout)));
        wait_for_slots(std::to_string(el_.min_np) + " slots (--min-np) after a reset");
        return;
      }
      return activate(hs);
    }
    case RoundEnd::Kind::kSucceeded: {
      std::vector<ExitedMsg> failed;
      for (const auto& f : end.failed)
        if (const auto it = last_exit_.find(f); it != last_exit_.end()) failed.push_back(it->second);
      return hooks_.succeeded(failed);
    }
    case RoundEnd::Kind::kAllBlacklisted:
      for (const std::string& h : end.blacklist) admission_.blacklist(h);
      return hooks_.fail("elastic: " + end.why);
    default:
      return hooks_.fail("elastic: " + end.why);
  }
}

void ElasticRounds::wait_for_slots(const std::string& what) {
  slots_timer_.expires_after(el_.timeout);
  slots_timer_.async_wait([this, what](auto ec) {
    if (ec || phase_.on(Event::kSlotsTimeout) != Action::kFail) return;
    const auto hs = admission_.usable_hosts();
    hooks_.fail("timed out after " + seconds_text(std::chrono::duration_cast<milliseconds>(el_.timeout)) +
                " (--elastic-timeout) waiting for " + what + ": " + std::to_string(slot_count(hs)) + " usable" +
                (hs.empty() ? "" : " on " + fold_names(assignment_hosts(assign_slots(hs, std::nullopt)))) +
                "; check the discovery script's output and the hosts' agents above");
  });
}

// ---- the workers' ends ----------------------------------------------------------------------------

void ElasticRounds::worker_ended(const SlotKey& key, const ExitedMsg& m, bool forming_now) {
  if (late_.forget_replacing(key)) return start_replacement(key);
  if (!slot_of(key)) {
    log_of(LogSubsys::kRank).info("{} ended ({}) outside the assignment; ignored", slot_text(key), describe_exit(m));
    return;
  }
  const bool ok = !exit_failed(m);
  last_exit_[key] = m;
  if (!ok) {
    spdlog::warn("worker {} on {} {}; its host will be blacklisted", slot_text(key), key.first, describe_exit(m));
    note_change("the failure of " + slot_text(key));
  }
  late_.forget_late(key);
  if (!ok && forming_now)
    if (auto end = record_held_ready(key.first)) return on_round_end(*end);
  if (auto end = registry_.record(key.first, key.second, ok ? WorkerState::kSuccess : WorkerState::kFailure, false))
    return on_round_end(*end);
  if (!ok) arm_late_timer();
}

void ElasticRounds::workers_lost(const std::string& host, const std::vector<SlotKey>& gone, bool forming_now) {
  if (!gone.empty() && forming_now)
    if (auto end = record_held_ready(host)) return on_round_end(*end);
  for (const auto& k : gone) {
    if (phase_.stopping()) break;
    late_.forget_replacing(k);
    if (!slot_of(k)) continue;
    late_.forget_late(k);
    if (auto end = registry_.record(k.first, k.second, WorkerState::kFailure, false)) {
      on_round_end(*end);
      break;
    }
    arm_late_timer();
  }
}

// A worker failed and the round waits for the others to re-initialise: LateWorkers.
void ElasticRounds::arm_late_timer() {
  late_.arm_grace([this, round = registry_.round()] {
    if (registry_.round() != round || phase_.on(Event::kLateGraceOver) != Action::kEndRoundEarly) return;
    early_round_end();
  });
}

void ElasticRounds::early_round_end() {
  std::vector<SlotKey> silent;
  for (const SlotInfo& s : assignment_)
    if (!registry_.has_recorded(s.host, s.local_rank)) silent.push_back({s.host, s.local_rank});
  if (silent.empty()) return;
  log_of(LogSubsys::kRendezvous)
      .info("ending the round without {} still silent {} after a failure", silent.size(),
            seconds_text(LateWorkers::kLateGrace));
  late_.arm_replace([this] {
    if (phase_.on(Event::kReplaceTimeout) == Action::kReplaceSilent)
      late_.replace([this](const SlotKey& k) { return slot_of(k); });
  });
  for (const SlotKey& k : silent) {
    late_.mark_late(k);
    if (auto end = registry_.record(k.first, k.second, WorkerState::kReady, pool_.blacklisted(k.first)))
      return on_round_end(*end);
  }
}

// A replaced worker has exited: a fresh one for its slot, if the slot is still assigned. It joins as a
// newcomer does (its first hvd.init reads its rank from the environment); the others wait for it in
// Gloo's rendezvous, or, while forming, stay held until it reaches it.
void ElasticRounds::start_replacement(const SlotKey& key) {
  late_.forget_late(key);
  // Waiting after a reset, the next activation starts a worker for each assigned slot without one.
  if (phase_.phase() == Phase::kResuming) return;
  if (!slot_of(key)) return maybe_report_resumed();
  const auto started_ranks = workers_.start(assignment_);
  if (!started_ranks) return hooks_.fail(ElasticWorkers::bound_text());
  if (phase_.stopping()) return;
  log_of(LogSubsys::kRank).info("{} replaced: a fresh worker starts", slot_text(key));
  if (phase_.phase() == Phase::kForming)
    forming_.insert(started_ranks->begin(), started_ranks->end());
  else
    late_.add_replacements(*started_ranks);
  maybe_report_resumed();
}

void ElasticRounds::stop() {
  slots_timer_.cancel();
  late_.cancel();
  notice_.cancel();
  // Held rank_and_size requests stay unanswered: "-1,..." would make Horovod abort those workers with
  // a core dump's worth of output, while SIGTERM ends them quietly. The rendezvous closes at the end.
  held_.clear();
}

}  // namespace hvrun

#include "launcher/job/elastic_rounds.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/log.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/job/rank_exits.hpp"

namespace hvrun {

using std::chrono::milliseconds;

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
      held_(io, phase, assignment_,
            HeldWorkers::Hooks{.slot_of = [this](const SlotKey& k) { return slot_of(k); },
                               .answered = [this](const SlotKey& k) { late_.forget_late(k); },
                               .released = [this] { maybe_report_resumed(); }}),
      slots_timer_(io) {}

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
  // The first world's links are measured before its first worker; the start is weighed again after.
  if (admission_.measuring_links()) return;
  if (!links_asked_) {
    links_asked_ = true;
    return admission_.measure_links(assignment_hosts(assign_slots(hs, el_.max_np)), [this] { maybe_start(); });
  }
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

// driver.py _activate_workers: a new assignment, a new round, the held answers (HeldWorkers: held
// while the new workers start), and workers for the slots that have none.
void ElasticRounds::activate(const std::vector<HostSlots>& hs) {
  std::vector<SlotInfo> next = assign_slots(hs, el_.max_np);
  const std::vector<std::string> before = assignment_hosts(assignment_), after = assignment_hosts(next);
  if (!assignment_.empty() && std::none_of(before.begin(), before.end(), [&](const std::string& h) {
        return std::find(after.begin(), after.end(), h) != after.end();
      }))
    return hooks_.fail("no host of the last world is left (" + fold_names(before) +
                       "), so no worker can hand the training state on; the job cannot go on");
  const bool first = assignment_.empty();
  held_.end_forming();
  late_.clear_replacements();
  notice_.cancel();  // the change is in this world, or told again when the hosts change next
  phase_.move_to(Phase::kOpen);
  assignment_ = std::move(next);
  registry_.reset(static_cast<int>(assignment_.size()));
  admission_.new_world();
  for (const std::string& h : after)
    if (!first && std::find(before.begin(), before.end(), h) == before.end())
      spdlog::warn("{} joined: {} ranks now", h, assignment_.size());
  if (hooks_.world)
    hooks_.world(static_cast<int>(assignment_.size()), after,
                 first ? "the first world" : change_at_ ? change_what_ : "the hosts changed");
  const auto started_ranks = workers_.start(assignment_);
  if (!started_ranks) return hooks_.fail(ElasticWorkers::bound_text());
  if (phase_.stopping()) return;
  held_.form(*started_ranks, [this, round = registry_.round()] {
    return registry_.round() == round && phase_.on(Event::kFormingTimeout) == Action::kRelease;
  });
}

void ElasticRounds::on_rank_published(int rank) {
  const Action action = phase_.on(Event::kRankPublished);
  if (action == Action::kNoteReplacement && late_.replacement_began(rank)) return maybe_report_resumed();
  if (action == Action::kReleaseIfLast) held_.reached(rank);
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
  held_.hold({host, lr}, std::move(answer));
  log_of(LogSubsys::kRendezvous).debug("{} is ready ({} of {})", slot_text({host, lr}), registry_.recorded() + 1, registry_.size());
  if (auto end = registry_.record(host, lr, WorkerState::kReady, out)) on_round_end(*end);
}

void ElasticRounds::on_round_end(const RoundEnd& end) {
  if (phase_.on(Event::kRoundEnded) != Action::kEndRound) return;
  switch (end.kind) {
    case RoundEnd::Kind::kReset: {
      held_.end_forming();  // the held answers go out with the next world
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
    if (auto end = held_.record_held_ready(registry_, key.first)) return on_round_end(*end);
  if (auto end = registry_.record(key.first, key.second, ok ? WorkerState::kSuccess : WorkerState::kFailure, false))
    return on_round_end(*end);
  if (!ok) arm_late_timer();
}

void ElasticRounds::workers_lost(const std::string& host, const std::vector<SlotKey>& gone, bool forming_now) {
  if (!gone.empty() && forming_now)
    if (auto end = held_.record_held_ready(registry_, host)) return on_round_end(*end);
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
    held_.add_forming(*started_ranks);
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
  held_.drop();
}

}  // namespace hvrun

#pragma once
// The old world's workers held while the new world forms (ElasticRounds; a deviation from Horovod, which
// answers at once). After a reset the old world's workers wait in rank_and_size. Answered at once, they
// would begin Gloo's rendezvous and wait there for the new workers, which are still starting (Python,
// torch: seconds); a new host lost meanwhile would leave them stuck until Gloo's timeout (30 s), then
// aborting, and the job with them (so under horovodrun). Held until every new worker has begun the
// rendezvous (forming: form()), they can still be given another world if one is lost: a failure during
// forming ends the round (record_held_ready), and the next activation answers them. This class keeps the
// held answers, the new ranks awaited and the forming timer; the world and its rounds are ElasticRounds'.
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/elastic_phase.hpp"
#include "launcher/elastic/worker_registry.hpp"
#include "launcher/job/elastic_slots.hpp"

namespace hvrun {

class HeldWorkers {
 public:
  using Answer = std::function<void(std::string)>;  // a rank_and_size request's answer
  // How long the workers of the old world stay held (their rank_and_size unanswered) while the new world's
  // new workers start and reach Gloo's rendezvous; then they are answered anyway. Python and torch's
  // import take seconds on a loaded host.
  static constexpr std::chrono::milliseconds kFormingTimeout{60000};

  struct Hooks {
    // The slot's numbers in the world, or nothing when it is not assigned (or its host is blacklisted).
    std::function<std::optional<SlotInfo>(const SlotKey&)> slot_of;
    std::function<void(const SlotKey&)> answered;  // the held worker on the slot got its answer
    std::function<void()> released;                // every held answer went out
  };

  // `phase` is the job's and `world` (the assignment) ElasticRounds'; both outlive this object.
  HeldWorkers(boost::asio::io_context& io, ElasticPhase& phase, const std::vector<SlotInfo>& world, Hooks hooks);

  // rank_and_size from the worker on `slot`: its answer waits for the round's end.
  void hold(const SlotKey& slot, Answer answer) { held_.emplace_back(slot, std::move(answer)); }
  // The new world's workers `started` (their ranks) are starting. With workers held and some started, the
  // held wait until each has begun the rendezvous (kForming), at most kFormingTimeout (then they go ahead
  // when `due()` says the timeout still counts); otherwise the held answers go out now.
  void form(const std::vector<int>& started, std::function<bool()> due);
  // Replacement workers started while forming: the held wait for them too.
  void add_forming(const std::vector<int>& ranks) { forming_.insert(ranks.begin(), ranks.end()); }
  // `rank` of the new world began the rendezvous; the last one awaited releases the held answers.
  void reached(int rank);
  // kForming -> kOpen (no more held for new workers); nothing in another phase.
  void end_forming();
  // The held answers go out, each slot's numbers in the world (-1s for a slot no longer in it).
  void release_held();
  // A worker failed or its host was lost while forming: the held workers count as READY in `registry`'s
  // round, which they are (waiting in rank_and_size), so the failure can end the round at once; those of
  // `failing_host` are left to the failure's own record. Returns the round's end when that completed it.
  std::optional<RoundEnd> record_held_ready(WorkerRegistry& registry, const std::string& failing_host);
  // The job stops: the held rank_and_size requests stay unanswered.
  void drop() { held_.clear(); }

 private:
  std::string forming_slots_text() const;

  ElasticPhase& phase_;
  const std::vector<SlotInfo>& world_;
  Hooks hooks_;
  boost::asio::steady_timer forming_timer_;  // kFormingTimeout while the new world forms
  std::vector<std::pair<SlotKey, Answer>> held_;
  // The ranks of the new world's new workers that have not yet begun Gloo's rendezvous, while the old
  // world's workers are held for them (form()); empty otherwise.
  std::set<int> forming_;
};

}  // namespace hvrun

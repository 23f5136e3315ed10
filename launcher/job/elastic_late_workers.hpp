#pragma once
// The workers of an elastic round that stay silent after a failure in it (ElasticRounds). A worker failed
// and the round waits for the others to re-initialise. Those that talked to it learn it at once; one
// blocked in a collective with a peer that is alive but resetting waits out Gloo's timeout (30 s), and
// that peer waits in rank_and_size for it: under horovodrun the job stalls there. hvrun ends the round
// kLateGrace after the failure instead (arm_grace()), as if the silent workers had said READY: the
// others get the new world, rebuild their Gloo contexts, and their old connections' closing wakes the
// silent ones (late: their rank_and_size is then answered at once). (A deviation from Horovod's
// registry, which waits for every worker.) One still silent kReplaceAfter later is killed and replaced
// by a fresh worker on its slot (replace()): it is blocked in a collective (a recv from a peer that failed
// or reset does not wake when that peer's connection closes: Gloo's unbound buffers wait for their
// timeout, HOROVOD_GLOO_TIMEOUT_SECONDS, 30 s), while the others wait for it in the new world's
// rendezvous. Its state is a copy of the others' (elastic workers sync from rank 0 on each reset), so
// nothing is lost, and a fresh worker's start (Python, torch: seconds) is far shorter than the wait.
// This class keeps those slots and timers; the round's records are ElasticRounds'.
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/job/elastic_slots.hpp"
#include "launcher/job/elastic_workers.hpp"
#include "launcher/start/agent_links.hpp"

namespace hvrun {

class LateWorkers {
 public:
  // After a worker of the round fails, how long the others get to re-initialise (each asks
  // rank_and_size) before hvrun ends the round without those still silent.
  static constexpr std::chrono::milliseconds kLateGrace{2000};
  // A worker still silent this long after its round ended without it is killed and replaced.
  static constexpr std::chrono::milliseconds kReplaceAfter{3000};

  LateWorkers(boost::asio::io_context& io, AgentLinks& links, const ElasticWorkers& workers);

  // `over` runs kLateGrace from now (unless arm_grace() comes again or cancel()).
  void arm_grace(std::function<void()> over);
  // The round ended without some: `due` runs kReplaceAfter from now (unless cancel()).
  void arm_replace(std::function<void()> due);

  // Late slots: their round ended without them, so their next rank_and_size is answered at once.
  void mark_late(const SlotKey& k) { late_.insert(k); }
  bool late(const SlotKey& k) const { return late_.contains(k); }
  bool forget_late(const SlotKey& k) { return late_.erase(k) > 0; }

  // The late workers still silent, each holding a slot of `slot_of` (the assignment) other than rank 0's,
  // are killed; each one's exit starts a fresh worker on its slot (replacing: ElasticRounds).
  void replace(const std::function<std::optional<SlotInfo>(const SlotKey&)>& slot_of);
  bool replacing(const SlotKey& k) const { return replacing_.contains(k); }
  bool forget_replacing(const SlotKey& k) { return replacing_.erase(k) > 0; }

  // The ranks of replacement workers that have not yet begun Gloo's rendezvous.
  void clear_replacements() { replacements_.clear(); }
  void add_replacements(const std::vector<int>& ranks) { replacements_.insert(ranks.begin(), ranks.end()); }
  // `rank` was a replacement's and began the rendezvous: whether it was the last of them.
  bool replacement_began(int rank) { return replacements_.erase(rank) > 0 && replacements_.empty(); }
  // No worker is being replaced or has yet to begin the rendezvous as a replacement.
  bool settled() const { return replacing_.empty() && replacements_.empty(); }

  void cancel();

 private:
  AgentLinks& links_;
  const ElasticWorkers& workers_;
  boost::asio::steady_timer late_timer_;     // kLateGrace after a failure in the round
  boost::asio::steady_timer replace_timer_;  // kReplaceAfter once a round ended without silent workers
  std::set<SlotKey> late_;
  // Late slots whose worker hvrun killed to start a fresh one there; it starts when the old one's exit
  // arrives.
  std::set<SlotKey> replacing_;
  std::set<int> replacements_;
};

}  // namespace hvrun

#pragma once
// One round of NIC discovery (docs/DESIGN.md §5.2), pure logic: which addresses each member probes,
// the results as they arrive, whether the choice is already final, the choice itself, and which probes
// to send again before giving up. The job sends the probes and feeds the answers; nothing here waits.
// Index spaces: a "member" is a host with an agent, numbered in host order (the inventories'
// index); `members[m]` is its index in the job's host list.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "launcher/nic/nic_cache.hpp"
#include "launcher/nic/nic_filter.hpp"
#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

class ProbeRound {
 public:
  using Probe = std::pair<std::size_t, std::size_t>;  // (prober member, index into targets())

  // `inventories` parallel to `members`; `peers` as probe_peer_count gives it (0: all pairs); `final_early`:
  // whether a choice that no pending probe can change ends the round (a launch) or every result is
  // awaited (--check-only, which reports every NIC). Throws UsageError when the filter names NICs that
  // some member lacks (probe_targets).
  ProbeRound(std::vector<std::size_t> members, std::vector<HostInventory> inventories, NicFilter filter,
             bool single_host, std::size_t peers, bool final_early);

  const std::vector<std::size_t>& members() const { return members_; }
  const std::vector<HostInventory>& inventories() const { return inventories_; }
  const std::vector<ProbeTarget>& targets() const { return targets_; }
  // The probes of the round so far, most deciding first (probe_order). In a launch (`final_early`) only each
  // NIC's first offered address is planned at first: a NIC's next address (its IPv6 one, after the IPv4)
  // can only matter when some prober did not reach the one before, so it joins the plan, from every prober
  // of its host, when such a result arrives (add, take_released). That halves a dual-stack fabric's probes
  // in the common case. --check-only plans every address: it reports each one.
  const std::vector<Probe>& planned() const { return planned_; }
  // The member index of host `host` of the job; nullopt for a host without an agent.
  std::optional<std::size_t> member_of(std::size_t host) const;

  // Takes one result (member indices); true when every probe sent (planned or sent again) has answered.
  // A second result of one probe (a late answer to an attempt that was already judged) replaces the
  // first: the latest answer counts, and each probe is judged and sent again once.
  bool add(ProbeResult result);
  // The probes that results have added to the plan since the last call (see planned()), for the job to
  // send; already counted as sent and awaited. Results that come after decide() (late answers) add
  // nothing, unless retry() has begun another attempt.
  std::vector<Probe> take_released();
  // True when the choice is the same whether every pending probe fails or succeeds, and every member
  // has one: waiting longer cannot change it. Always false without `final_early`.
  bool decision_is_final() const;
  // Judges what has arrived (a missing result counts as "not probed").
  void decide();
  // After decide(): when some member has no usable NIC and probes towards it timed out, and fewer than
  // kMaxProbeAttempts attempts were made, forgets those results and returns the probes to send again
  // (attempts() is then the attempt they belong to); else empty.
  std::vector<Probe> retry();

  // Takes a cached round's outcome (nic_cache.hpp) instead of probing: one per member, in member order.
  // The selections then hold each host's choice and its usable NICs only (no peer views, no skipped NICs),
  // and nothing is planned or awaited. Call before any result; throws InternalError on a size mismatch.
  void adopt(const std::vector<CachedSelection>& cached);

  // Valid after decide() or adopt(); parallel to members().
  const std::vector<HostSelection>& selections() const { return selections_; }
  // The NIC chosen for host `host` of the job; nullopt without an agent or without a usable NIC.
  std::optional<NicChoice> choice_of(std::size_t host) const;
  bool every_member_chosen() const;

  int attempts() const { return attempts_; }
  std::size_t probes_sent() const { return sent_; }  // every attempt's, for --verbose's timings
  const std::vector<std::vector<std::size_t>>& probers() const { return probers_; }

 private:
  std::vector<std::size_t> members_;
  std::vector<HostInventory> inventories_;
  NicFilter filter_;
  bool single_host_;
  bool final_early_;
  std::vector<ProbeTarget> targets_;
  std::vector<std::vector<std::size_t>> probers_;  // per member, the members that probe it (probe_peers.hpp)
  std::vector<Probe> planned_;
  std::vector<std::size_t> next_address_;  // per target: the same NIC's next offered address, or npos
  std::vector<bool> released_;             // per target: planned from every prober of its host
  std::map<std::pair<std::size_t, std::string>, std::size_t> target_at_;  // (host member, address) -> target
  std::vector<Probe> fresh_;               // planned by add() and not yet taken
  bool judged_ = false;                    // decide() ran, and no retry() attempt since
  void release(std::size_t target);
  std::vector<ProbeResult> results_;                            // one per probe: the latest answer
  std::map<std::tuple<std::size_t, std::size_t, std::string>, std::size_t> result_at_;  // (from, to, address)
  std::map<std::tuple<std::size_t, std::size_t, std::string>, std::size_t> unanswered_;  // sends without answer
  std::size_t outstanding_ = 0;  // the sum of unanswered_
  std::vector<HostSelection> selections_;
  int attempts_ = 1;
  std::size_t sent_ = 0;
};

}  // namespace hvrun

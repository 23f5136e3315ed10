#pragma once
// The host side of a Horovod elastic job, with the rules of Horovod 0.28.1's driver
// (horovod/runner/elastic/discovery.py HostManager and HostDiscoveryScript, common/util/hosts.py
// get_host_assignments), as pure code: what the discovery script printed, which hosts are usable and in
// which order, blacklisting with its cooldown, and the ranks that order gives each slot. The driver
// (the job) runs the script, the clock and the workers; this decides.
//
// Where Horovod's behaviour depends on a Python set's order (the order in which new hosts join the
// assignment), hvrun takes the discovery script's order, so that the same output always gives the same
// ranks.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/horovod_pickle.hpp"

namespace hvrun {

struct HostSlots {
  std::string host;
  int slots = 0;
  bool operator==(const HostSlots&) const = default;
};

// A discovery script's stdout: one host per line, "HOST" (then --slots-per-host slots) or "HOST:SLOTS";
// blank lines skipped; a line seen twice counts once, and a host named twice with different slots is
// refused, as are slots that are not a positive number and a bare HOST without --slots-per-host (where
// horovodrun fails later with a Python TypeError). UsageError names `script` and the line.
std::vector<HostSlots> parse_discovery_output(std::string_view out, std::optional<int> slots_per_host,
                                              const std::string& script);

// One slot of an assignment: the numbers Horovod's rank_and_size answer carries.
struct SlotInfo {
  std::string host;
  int rank = -1, size = -1, local_rank = -1, local_size = -1, cross_rank = -1, cross_size = -1;
  // "rank,size,local_rank,local_size,cross_rank,cross_size", as SlotInfo.to_response_string; a slot
  // without an assignment answers "-1,-1,-1,-1,-1,-1".
  std::string response() const;
  bool operator==(const SlotInfo&) const = default;
};

// get_host_assignments: ranks in host order, each host's slots in turn, at most `max_np` in all (none:
// unbounded); cross ranks count the hosts that have a slot at each local rank. The caller compares the
// size with --min-np.
std::vector<SlotInfo> assign_slots(const std::vector<HostSlots>& hosts, std::optional<int> max_np);

// HostManager: the discovered hosts, their assignment order, and each host's blacklist state.
class ElasticHosts {
 public:
  using Clock = std::chrono::steady_clock;
  // `cooldown`: --blacklist-cooldown-range in seconds (none: a blacklisted host stays out for good).
  // `jitter` returns a number in [0, 1) for the cooldown's random part (tests pass a fixed one).
  ElasticHosts(std::optional<std::pair<int, int>> cooldown, std::function<double()> jitter);

  // A new discovery result. When it differs from the last, or a blacklisted host's cooldown has ended,
  // the order keeps the hosts already in it (oldest first, so they keep the low ranks) and appends new
  // ones in `discovered` order; a host whose cooldown ended is whitelisted and counts as added. Returns
  // what changed, as the workers are told it.
  HorovodHostUpdate update(const std::vector<HostSlots>& discovered, Clock::time_point now);
  // A host whose worker failed, or which was lost: out of the order; when its cooldown ends, it joins
  // again at the end of the order (Horovod drops a blacklisted host from the order the same way).
  void blacklist(const std::string& host, Clock::time_point now);
  bool blacklisted(const std::string& host) const;
  // When the host's blacklisting ends (nothing if it is not blacklisted or never comes back).
  std::optional<Clock::time_point> cooldown_end(const std::string& host) const;

  // The usable hosts in assignment order, with their slots.
  std::vector<HostSlots> available() const;
  int available_slots() const;

 private:
  struct State {
    bool blacklisted = false;
    int count = 0;
    std::optional<Clock::time_point> cooldown_end;
  };
  bool resurrected(const std::string& host, Clock::time_point now) const;

  std::optional<std::pair<int, int>> cooldown_;
  std::function<double()> jitter_;
  std::map<std::string, int> slots_;  // the last discovery result
  std::vector<std::string> order_;
  std::map<std::string, State> states_;
};

}  // namespace hvrun

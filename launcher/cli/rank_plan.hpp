#pragma once
// Which ranks run where: ranks fill hosts in the order given, each host's ranks contiguous.
#include <string>
#include <vector>

#include "launcher/cli/host_list.hpp"

namespace hvrun {

struct HostPlan {
  std::string host;      // HostSpec::name
  int slots = 0;         // what the user offered
  int first_rank = 0;    // global rank of local rank 0 on this host
  int local_size = 0;    // ranks placed here (0 when -np leaves this host unused)
};

struct RankInfo {
  int rank = 0, size = 0;
  int local_rank = 0, local_size = 0;
  int cross_rank = 0, cross_size = 0;  // Horovod's: among hosts with more than local_rank ranks
  int host_index = 0;                  // index into RankPlan::hosts
  int node_rank = 0;                   // index among hosts that run ranks (torch's GROUP_RANK)
  int node_count = 0;                  // hosts that run ranks (torch's GROUP_WORLD_SIZE)
};

class RankPlan {
 public:
  // np <= 0 means "all slots". np below the total fills hosts in order, so later hosts may get none.
  // np above the total spreads ranks in proportion to slots (largest remainder, ties to the earlier
  // host) unless `no_oversubscribe`, which makes it a UsageError naming both numbers. Hosts left with
  // no rank stay in hosts() with local_size 0 and count for nothing else (cross ranks, node ranks).
  // An empty host list, or slots that add up past INT_MAX, is a UsageError.
  RankPlan(std::vector<HostSpec> hosts, int np, bool no_oversubscribe);

  int size() const { return size_; }
  int total_slots() const { return total_slots_; }
  bool oversubscribed() const { return size_ > total_slots_; }
  const std::vector<HostPlan>& hosts() const { return hosts_; }
  RankInfo rank(int global_rank) const;  // 0 <= global_rank < size()
  // --max-restarts: the plan for `np` ranks on the hosts not `gone` (parallel to hosts()), filled in
  // order; gone hosts stay in hosts() with no slot and no rank. Throws Error when the hosts left have
  // fewer than `np` slots (the caller decides np from them) or np < 1.
  RankPlan without(const std::vector<bool>& gone, int np) const;

 private:
  RankPlan() = default;
  // Fills hosts in order, each up to its slots, with size_ ranks (size_ <= total_slots_); then numbers them.
  void fill_in_order();
  void number_ranks();

  std::vector<HostPlan> hosts_;
  int size_ = 0;
  int total_slots_ = 0;
};

}  // namespace hvrun

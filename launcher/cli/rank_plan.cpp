#include "launcher/cli/rank_plan.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/error.hpp"

namespace hvrun {

namespace {

// Ranks per host for np > total slots: each host's exact share is np * slots / total; hosts get the
// floor of it, and the ranks still unplaced go one each to the largest fractional parts, the earlier
// host winning a tie, so the result never depends on anything but the order the user gave.
std::vector<int> proportional_shares(const std::vector<HostPlan>& hosts, std::int64_t np, std::int64_t total) {
  std::vector<int> shares(hosts.size());
  std::vector<std::int64_t> remainders(hosts.size());
  std::int64_t placed = 0;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::int64_t scaled = np * hosts[i].slots;
    shares[i] = static_cast<int>(scaled / total);
    remainders[i] = scaled % total;
    placed += shares[i];
  }
  for (std::int64_t left = np - placed; left > 0; --left) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < hosts.size(); ++i) {
      if (remainders[i] > remainders[best]) best = i;
    }
    ++shares[best];
    remainders[best] = -1;  // at most one extra rank per host: the leftover is below the host count
  }
  return shares;
}

}  // namespace

RankPlan::RankPlan(std::vector<HostSpec> hosts, int np, bool no_oversubscribe) {
  if (hosts.empty()) throw UsageError("no hosts to run on (-H or --hostfile)");
  std::int64_t total = 0;
  for (const auto& h : hosts) {
    if (h.slots <= 0) {
      throw UsageError("host '" + h.name + "': slots must be a positive integer, not " + std::to_string(h.slots));
    }
    total += h.slots;
    hosts_.push_back(HostPlan{h.name, h.slots, 0, 0});
  }
  if (total > INT_MAX) throw UsageError("the hosts' slots add up to " + std::to_string(total) + ", too many");
  total_slots_ = static_cast<int>(total);
  size_ = np <= 0 ? total_slots_ : np;

  if (size_ > total_slots_) {
    if (no_oversubscribe) {
      throw UsageError("-np " + std::to_string(size_) + " exceeds the " + std::to_string(total_slots_) +
                       " slots of -H/--hostfile; remove --no-oversubscribe or add slots");
    }
    const auto shares = proportional_shares(hosts_, size_, total_slots_);
    for (std::size_t i = 0; i < hosts_.size(); ++i) hosts_[i].local_size = shares[i];
  } else {
    fill_in_order();
  }
  number_ranks();
}

void RankPlan::fill_in_order() {
  int left = size_;
  for (auto& h : hosts_) {
    h.local_size = std::min(h.slots, left);
    left -= h.local_size;
  }
}

void RankPlan::number_ranks() {
  int next = 0;
  for (auto& h : hosts_) {
    h.first_rank = next;
    next += h.local_size;
  }
}

RankPlan RankPlan::without(const std::vector<bool>& gone, int np) const {
  if (gone.size() != hosts_.size()) throw Error("a restart plan needs one gone-or-not per host");
  RankPlan next;
  next.hosts_ = hosts_;
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    if (gone[i]) next.hosts_[i].slots = 0;
    next.total_slots_ += next.hosts_[i].slots;
  }
  if (np < 1 || np > next.total_slots_)
    throw Error("a restart plan for " + std::to_string(np) + " ranks on " + std::to_string(next.total_slots_) +
                " slots");
  next.size_ = np;
  next.fill_in_order();
  next.number_ranks();
  return next;
}

RankInfo RankPlan::rank(int global_rank) const {
  if (global_rank < 0 || global_rank >= size_) {
    throw Error("rank " + std::to_string(global_rank) + " outside the plan's 0.." + std::to_string(size_ - 1));
  }
  RankInfo info;
  info.rank = global_rank;
  info.size = size_;
  int node = 0;
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    const auto& h = hosts_[i];
    if (h.local_size == 0) continue;
    if (global_rank >= h.first_rank && global_rank < h.first_rank + h.local_size) {
      info.host_index = static_cast<int>(i);
      info.node_rank = node;
      info.local_rank = global_rank - h.first_rank;
      info.local_size = h.local_size;
    }
    ++node;
  }
  info.node_count = node;
  // Horovod's cross communicator: the ranks with this local rank, one per host that has that many.
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].local_size <= info.local_rank) continue;
    if (static_cast<int>(i) == info.host_index) info.cross_rank = info.cross_size;
    ++info.cross_size;
  }
  return info;
}

}  // namespace hvrun

#pragma once
// --max-restarts without sockets or timers: the budget (torchrun's meaning: one for the whole job,
// spent by each restart whatever caused it), and the ranks of the next attempt after hosts were lost.
// The job (job.cpp) stops the ranks, prepares the agents and launches again; docs/DESIGN.md, "Restarts".
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/rank_plan.hpp"

namespace hvrun {

class RestartPlan {
 public:
  // `np`: the ranks of the first attempt; `min_np`: --min-np, 0 when not given (every attempt runs np).
  RestartPlan(int max_restarts, int np, int min_np) : max_(max_restarts), np_(np), min_np_(min_np) {}

  bool enabled() const { return max_ > 0; }
  int max() const { return max_; }
  int used() const { return used_; }
  // Spends one restart; false, changing nothing, when the budget is spent.
  bool spend();

  // The next attempt's ranks on `current`'s hosts less those `gone` (parallel to current.hosts(), as
  // `names`): the first attempt's np when the slots left hold it, else with --min-np as many as they
  // hold, down to it. Otherwise nothing, and why_not says which hosts are gone, what is left, and
  // what to give.
  struct Next {
    std::optional<RankPlan> plan;
    std::string why_not;
  };
  Next next(const RankPlan& current, const std::vector<bool>& gone, const std::vector<std::string>& names) const;

 private:
  int max_;
  int np_;
  int min_np_;
  int used_ = 0;
};

}  // namespace hvrun

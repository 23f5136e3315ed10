#include "launcher/job/restart_plan.hpp"

#include "launcher/base/host_names.hpp"

namespace hvrun {

bool RestartPlan::spend() {
  if (used_ >= max_) return false;
  ++used_;
  return true;
}

RestartPlan::Next RestartPlan::next(const RankPlan& current, const std::vector<bool>& gone,
                                    const std::vector<std::string>& names) const {
  int slots = 0;
  std::vector<std::string> lost;
  for (std::size_t i = 0; i < current.hosts().size(); ++i) {
    if (gone.at(i)) {
      if (current.hosts()[i].slots > 0) lost.push_back(names.at(i));
    } else {
      slots += current.hosts()[i].slots;
    }
  }
  if (lost.empty()) return {current, {}};
  if (slots >= np_) return {current.without(gone, np_), {}};
  const std::string left = std::to_string(slots) + (slots == 1 ? " slot" : " slots");
  if (min_np_ > 0 && slots >= min_np_) return {current.without(gone, slots), {}};
  if (min_np_ > 0)
    return {std::nullopt, "without " + fold_names(lost) + " the hosts have " + left + ", fewer than --min-np " +
                              std::to_string(min_np_) + "; add hosts, or lower --min-np"};
  return {std::nullopt, "without " + fold_names(lost) + " the hosts have " + left + ", fewer than the job's " +
                            std::to_string(np_) + " ranks; give --min-np N to restart with fewer ranks"};
}

}  // namespace hvrun

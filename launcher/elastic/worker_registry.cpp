#include "launcher/elastic/worker_registry.hpp"

#include <algorithm>

namespace hvrun {

WorkerRegistry::WorkerRegistry(std::optional<int> reset_limit) : reset_limit_(reset_limit) {}

void WorkerRegistry::reset(int size) {
  states_.clear();
  size_ = size;
  ++round_;
}

std::optional<RoundEnd> WorkerRegistry::record(const std::string& host, int local_rank, WorkerState state,
                                               bool host_blacklisted) {
  if (host_blacklisted || size_ == 0) return std::nullopt;
  const auto key = std::make_pair(host, local_rank);
  const auto it = std::find_if(states_.begin(), states_.end(), [&](const auto& e) { return e.first == key; });
  if (it != states_.end()) {
    // READY, then a failure while waiting for the others: it counts once, as FAILURE.
    if (state == WorkerState::kFailure) it->second = state;
    return std::nullopt;
  }
  states_.emplace_back(key, state);
  if (static_cast<int>(states_.size()) < size_) return std::nullopt;
  return complete();
}

bool WorkerRegistry::has_recorded(const std::string& host, int local_rank) const {
  const auto key = std::make_pair(host, local_rank);
  return std::any_of(states_.begin(), states_.end(), [&](const auto& e) { return e.first == key; });
}

RoundEnd WorkerRegistry::complete() {
  RoundEnd end;
  bool success = false;
  for (const auto& [key, state] : states_) {
    success = success || state == WorkerState::kSuccess;
    if (state != WorkerState::kFailure) continue;
    end.failed.push_back(key);
    if (std::find(end.blacklist.begin(), end.blacklist.end(), key.first) == end.blacklist.end())
      end.blacklist.push_back(key.first);
  }
  const int failures = static_cast<int>(end.failed.size());
  if (success) {
    end.kind = RoundEnd::Kind::kSucceeded;
    end.why = "a worker finished with exit code 0, so the job ends";
    return end;
  }
  if (failures == size_) {
    end.kind = RoundEnd::Kind::kAllFailed;
    end.why = "all " + std::to_string(size_) + " workers failed";
    return end;
  }
  const bool every_host_out = std::all_of(states_.begin(), states_.end(), [&](const auto& e) {
    return std::find(end.blacklist.begin(), end.blacklist.end(), e.first.first) != end.blacklist.end();
  });
  if (every_host_out) {
    end.kind = RoundEnd::Kind::kAllBlacklisted;
    end.why = "every host of the job is blacklisted";
    return end;
  }
  if (reset_limit_ && resets_ >= *reset_limit_) {
    end.kind = RoundEnd::Kind::kResetLimit;
    end.why = "--reset-limit " + std::to_string(*reset_limit_) + " reached: the job was reset " +
              std::to_string(resets_) + (resets_ == 1 ? " time" : " times") + " already, so it ends here";
    return end;
  }
  ++resets_;
  end.kind = RoundEnd::Kind::kReset;
  return end;
}

}  // namespace hvrun

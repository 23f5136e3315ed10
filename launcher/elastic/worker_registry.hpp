#pragma once
// The rendezvous rounds of a Horovod elastic job, with the rules of Horovod 0.28.1's
// WorkerStateRegistry (horovod/runner/elastic/registration.py), as pure code. Each round waits until
// every worker of the world it was reset to has recorded a state: READY (its rank_and_size request,
// i.e. it is re-initialising), SUCCESS (it exited 0) or FAILURE (it failed, or its host was lost). Then:
//   - any SUCCESS: the job is over (it succeeded if no recorded worker failed);
//   - every worker FAILURE: the job failed;
//   - otherwise each failed worker's host is blacklisted; if that leaves no host of the round, the job
//     failed; if --reset-limit resets were made already, the job failed with Horovod's message;
//     otherwise a reset: a new assignment from the hosts left, and a new round.
// A worker that recorded READY and then fails counts once, as FAILURE. A record from a blacklisted host
// or a repeated non-FAILURE record is ignored, as Horovod ignores it.
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hvrun {

enum class WorkerState { kReady, kSuccess, kFailure };

// What the driver does when a round is complete.
struct RoundEnd {
  enum class Kind {
    kReset,           // blacklist `blacklist`, assign again from the hosts left, start a new round
    kSucceeded,       // a worker succeeded: stop the others
    kAllFailed,       // every worker of the round failed
    kAllBlacklisted,  // every host of the round is blacklisted now
    kResetLimit,      // --reset-limit resets were made already
  };
  Kind kind = Kind::kReset;
  std::vector<std::string> blacklist;  // hosts of failed workers, in record order, each once
  std::vector<std::pair<std::string, int>> failed;  // (host, local rank) of each FAILURE, in record order
  std::string why;  // a line for the user: what ended the job (not for kReset)
};

class WorkerRegistry {
 public:
  explicit WorkerRegistry(std::optional<int> reset_limit);

  // A new round of `size` workers.
  void reset(int size);
  // Records `state` for HOST's LOCAL_RANK; `host_blacklisted` says whether the driver has that host
  // blacklisted. When this record completes the round, what to do next.
  std::optional<RoundEnd> record(const std::string& host, int local_rank, WorkerState state, bool host_blacklisted);

  // Whether HOST's LOCAL_RANK has recorded a state in this round.
  bool has_recorded(const std::string& host, int local_rank) const;
  int round() const { return round_; }
  int resets() const { return resets_; }
  int size() const { return size_; }
  int recorded() const { return static_cast<int>(states_.size()); }

 private:
  RoundEnd complete();

  std::optional<int> reset_limit_;
  int resets_ = 0;
  int round_ = 0;
  int size_ = 0;
  std::vector<std::pair<std::pair<std::string, int>, WorkerState>> states_;  // in record order
};

}  // namespace hvrun

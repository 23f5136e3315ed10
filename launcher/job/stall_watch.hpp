#pragma once
// --stall-timeout: when a running job has stalled, without timers. Activity is any rank output, or
// an agent's heartbeat saying its ranks used more CPU than kBusyShare of one core each since the one
// before (HeartbeatMsg::cpu_ms): a rank that computes counts as progress even when it prints nothing,
// while the few per cent that Horovod's background thread burns polling in a stuck allreduce does not.
#include <chrono>

namespace hvrun {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // A rank counts as busy above this share of one core (1/10).
  static constexpr int kBusyShareDivisor = 10;

  // `timeout` 0: never stalled. `interval`: how often agents send heartbeats.
  StallWatch(std::chrono::milliseconds timeout, std::chrono::milliseconds interval)
      : timeout_(timeout), interval_(interval) {}

  bool enabled() const { return timeout_.count() > 0; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The ranks started: the clock starts.
  void start(Clock::time_point now) { last_ = now; }
  void output(Clock::time_point now) { last_ = now; }
  // A heartbeat from a host running `ranks` ranks that used `cpu_ms` since its previous one.
  void heartbeat(int ranks, int cpu_ms, Clock::time_point now) {
    if (ranks > 0 && static_cast<long long>(cpu_ms) * kBusyShareDivisor > static_cast<long long>(interval_.count()) * ranks)
      last_ = now;
  }
  bool stalled(Clock::time_point now) const { return enabled() && now - last_ >= timeout_; }
  // How long until stalled() could first be true, seen from `now`.
  std::chrono::milliseconds until_stalled(Clock::time_point now) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(last_ + timeout_ - now);
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }

 private:
  std::chrono::milliseconds timeout_, interval_;
  Clock::time_point last_{};
};

}  // namespace hvrun

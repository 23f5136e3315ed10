#pragma once
// Issue 40: the agent watches its running ranks' main threads (RankSampler, agent/rank_sampler.hpp) on
// its own loop, ten looks a second, and sends the launcher each rank's shares every window
// (ObservationMsg), with each rank's slowest and fastest sending TCP connection (RankSockets over one
// TcpTable read a window for all the ranks: sock_diag, 2 to 5 ms, measured). Runs while the agent has ranks; costs the ranks nothing (it reads /proc and
// asks the kernel).
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/gpu_usage.hpp"
#include "agent/rank_sampler.hpp"
#include "agent/rank_sockets.hpp"
#include "common/control_message.hpp"

namespace hvrun {

class RankObserver {
 public:
  static constexpr std::chrono::milliseconds kLook{100};
  static constexpr std::chrono::milliseconds kWindow{2000};

  RankObserver(boost::asio::io_context& io, std::function<void(ObservationMsg)> send);

  // A rank started: watched from now. `stack_dir`: where its preloaded library answers (RankSampler).
  void add(int rank, pid_t pid, const std::string& stack_dir);
  void remove(pid_t pid);         // it ended (reaped)
  void stop();                    // the agent ends, or the job observes nothing: no more looks, no adds
  // No where asks for `duration` (a stack collection runs: RankSampler::sample's reason).
  void hold_asks(std::chrono::milliseconds duration) { asks_held_until_ = RankSampler::Clock::now() + duration; }

 private:
  struct Watched {
    int rank = 0;
    RankSampler sampler;
    RankSockets sockets;
  };
  void arm();
  void look();
  std::map<pid_t, GpuProcessUsage> gpu_by_pid();  // NVML's view of this window, once it is loaded
  // Each rank's connections in this window, by pid: one TcpTable read for them all.
  std::map<pid_t, RankSocketsSample> sockets_by_pid();

  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  std::function<void(ObservationMsg)> send_;
  std::map<pid_t, Watched> watched_;
  std::unique_ptr<TcpTable> tcp_;  // none when the kernel refused a sock_diag socket
  bool tcp_tried_ = false;
  RankSampler::Clock::time_point window_start_{};
  RankSampler::Clock::time_point asks_held_until_{};
  // NVML, loaded off the loop (nvmlInit can take seconds) when the first rank starts; sampled once a
  // window for the whole host. Its future's destructor waits for a load still running.
  std::future<std::unique_ptr<GpuUsage>> gpu_loading_;
  std::unique_ptr<GpuUsage> gpu_;
  bool armed_ = false;
  bool stopped_ = false;
};

}  // namespace hvrun

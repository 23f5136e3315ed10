#pragma once
// The heartbeat rule both ends of a control channel follow (HeartbeatMsg, control_message.hpp): each
// side sends a heartbeat every period / kHeartbeatsPerPeriod, whatever else it sends, and decides the
// other side is gone after a whole period in which no frame arrived. The launcher and the agent use
// this one definition, so the two sides cannot drift apart.
#include <chrono>
#include <functional>
#include <memory>

namespace boost::asio {
class io_context;
}

namespace hvrun {

// Heartbeats sent per watchdog period: three may be lost or late before the other side gives up.
inline constexpr int kHeartbeatsPerPeriod = 4;

// How often a side sends a heartbeat, for a watchdog period of `period`.
std::chrono::milliseconds heartbeat_interval(std::chrono::milliseconds period);

// Calls `send` every heartbeat_interval(period) from start() until stop() (or destruction).
class HeartbeatSender {
 public:
  HeartbeatSender(boost::asio::io_context& io, std::function<void()> send);
  ~HeartbeatSender();
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;

  void start(std::chrono::milliseconds period);
  // No send after this returns, not even one whose timer had already expired.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Calls `on_silence` once a whole period passes without rearm(). Until a period is set (or with a
// period of 0) it is disarmed: the agent knows the period only from the launcher's JobMsg.
class Watchdog {
 public:
  Watchdog(boost::asio::io_context& io, std::function<void()> on_silence);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void set_period(std::chrono::milliseconds period);
  std::chrono::milliseconds period() const;
  // A frame arrived: the period starts again.
  void rearm();
  void cancel();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

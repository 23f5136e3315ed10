#include "common/heartbeat.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace hvrun {

namespace asio = boost::asio;

std::chrono::milliseconds heartbeat_interval(std::chrono::milliseconds period) {
  return period / kHeartbeatsPerPeriod;
}

struct HeartbeatSender::Impl {
  Impl(asio::io_context& io, std::function<void()> s) : timer(io), send(std::move(s)) {}

  void schedule() {
    timer.expires_after(interval);
    timer.async_wait([this](auto ec) {
      if (ec || stopped) return;
      send();
      schedule();
    });
  }

  asio::steady_timer timer;
  std::function<void()> send;
  std::chrono::milliseconds interval{0};
  bool stopped = false;
};

HeartbeatSender::HeartbeatSender(asio::io_context& io, std::function<void()> send)
    : impl_(std::make_unique<Impl>(io, std::move(send))) {}
HeartbeatSender::~HeartbeatSender() = default;

void HeartbeatSender::start(std::chrono::milliseconds period) {
  impl_->interval = heartbeat_interval(period);
  impl_->stopped = false;
  impl_->schedule();
}

void HeartbeatSender::stop() {
  impl_->stopped = true;
  impl_->timer.cancel();
}

struct Watchdog::Impl {
  Impl(asio::io_context& io, std::function<void()> f) : timer(io), on_silence(std::move(f)) {}
  asio::steady_timer timer;
  std::function<void()> on_silence;
  std::chrono::milliseconds period{0};
};

Watchdog::Watchdog(asio::io_context& io, std::function<void()> on_silence)
    : impl_(std::make_unique<Impl>(io, std::move(on_silence))) {}
Watchdog::~Watchdog() = default;

void Watchdog::set_period(std::chrono::milliseconds period) { impl_->period = period; }
std::chrono::milliseconds Watchdog::period() const { return impl_->period; }

void Watchdog::rearm() {
  if (impl_->period.count() <= 0) return;
  impl_->timer.expires_after(impl_->period);
  impl_->timer.async_wait([this](auto ec) {
    if (!ec) impl_->on_silence();
  });
}

void Watchdog::cancel() { impl_->timer.cancel(); }

}  // namespace hvrun

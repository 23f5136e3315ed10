#include "agent/rank_observer.hpp"

#include <cmath>

namespace hvrun {

namespace {

int thousandths(double share) { return static_cast<int>(std::lround(share * 1000)); }

}  // namespace

RankObserver::RankObserver(boost::asio::io_context& io, std::function<void(ObservationMsg)> send)
    : io_(io), timer_(io), send_(std::move(send)) {}

void RankObserver::add(int rank, pid_t pid) {
  watched_.insert_or_assign(pid, Watched{rank, RankSampler(pid)});
  if (window_start_ == RankSampler::Clock::time_point{}) window_start_ = RankSampler::Clock::now();
  arm();
}

void RankObserver::remove(pid_t pid) { watched_.erase(pid); }

void RankObserver::stop() {
  watched_.clear();
  timer_.cancel();
  armed_ = false;
}

void RankObserver::arm() {
  if (armed_ || watched_.empty()) return;
  armed_ = true;
  timer_.expires_after(kLook);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    armed_ = false;
    if (!ec) look();
  });
}

void RankObserver::look() {
  for (auto& [pid, w] : watched_) w.sampler.sample();
  const auto now = RankSampler::Clock::now();
  if (now - window_start_ >= kWindow) {
    ObservationMsg m;
    m.window_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now - window_start_).count());
    for (auto& [pid, w] : watched_) {
      if (const auto s = w.sampler.take(now))
        m.ranks.push_back({w.rank, thousandths(s->busy), thousandths(s->starved), thousandths(s->waiting),
                           thousandths(s->own_data), thousandths(s->cpu_limit), s->cpu_ms, s->rss_kb});
    }
    window_start_ = now;
    if (!m.ranks.empty()) send_(std::move(m));
  }
  arm();
}

}  // namespace hvrun

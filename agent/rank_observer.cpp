#include "agent/rank_observer.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <unordered_set>

#include "common/log.hpp"

namespace hvrun {

namespace {

int thousandths(double share) { return static_cast<int>(std::lround(share * 1000)); }

// "10.0.0.2:4321" -> "10.0.0.2"; "[fd00::2]:4321" -> "fd00::2".
std::string peer_address(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') return peer.substr(1, peer.find(']') - 1);
  return peer.substr(0, peer.rfind(':'));
}

}  // namespace

RankObserver::RankObserver(boost::asio::io_context& io, std::function<void(ObservationMsg)> send)
    : io_(io), timer_(io), send_(std::move(send)) {}

void RankObserver::add(int rank, pid_t pid, const std::string& stack_dir) {
  if (stopped_) return;
  if (!gpu_ && !gpu_loading_.valid())
    gpu_loading_ = std::async(std::launch::async, [] { return std::make_unique<GpuUsage>(); });
  if (!tcp_tried_) {
    tcp_tried_ = true;
    try {
      tcp_ = std::make_unique<TcpTable>();
    } catch (const std::exception& e) {
      log_of(LogSubsys::kRank).debug("the ranks' connections are not observed: {}", e.what());
    }
  }
  watched_.insert_or_assign(pid, Watched{rank, RankSampler(pid, stack_dir), RankSockets(pid)});
  if (window_start_ == RankSampler::Clock::time_point{}) window_start_ = RankSampler::Clock::now();
  arm();
}

void RankObserver::remove(pid_t pid) { watched_.erase(pid); }

void RankObserver::stop() {
  stopped_ = true;
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

std::map<pid_t, GpuProcessUsage> RankObserver::gpu_by_pid() {
  if (gpu_loading_.valid() && gpu_loading_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    gpu_ = gpu_loading_.get();
    if (!gpu_->available())
      log_of(LogSubsys::kRank).debug("no GPU use is observed: {}", gpu_->unavailable_reason());
  }
  std::map<pid_t, GpuProcessUsage> out;
  if (!gpu_ || !gpu_->available()) return out;
  try {
    for (const GpuProcessUsage& u : gpu_->sample()) out.emplace(u.pid, u);
  } catch (const std::exception& e) {
    log_of(LogSubsys::kRank).debug("GPU use not read: {}", e.what());
  }
  return out;
}

std::map<pid_t, RankSocketsSample> RankObserver::sockets_by_pid() {
  std::map<pid_t, RankSocketsSample> out;
  if (!tcp_) return out;
  std::map<pid_t, std::optional<std::unordered_set<std::uint64_t>>> held;
  std::unordered_set<std::uint64_t> all;
  for (auto& [pid, w] : watched_) {
    try {
      auto inodes = w.sockets.inodes();
      if (inodes) all.insert(inodes->begin(), inodes->end());
      held.emplace(pid, std::move(inodes));
    } catch (const std::exception& e) {
      log_of(LogSubsys::kRank).debug("rank {}: its sockets were not read: {}", w.rank, e.what());
    }
  }
  TcpTable::Connections table;
  try {
    table = tcp_->read(all);
  } catch (const std::exception& e) {
    log_of(LogSubsys::kRank).debug("the ranks' connections were not read: {}", e.what());
    return out;
  }
  for (auto& [pid, inodes] : held) out.emplace(pid, watched_.at(pid).sockets.sample(inodes, table));
  return out;
}

void RankObserver::look() {
  // A rank gone is dropped here: the agent's own are also removed when reaped, mpirun's (--mpi) only so.
  const bool may_ask = RankSampler::Clock::now() >= asks_held_until_;
  for (auto it = watched_.begin(); it != watched_.end();)
    it = it->second.sampler.sample(may_ask) ? std::next(it) : watched_.erase(it);
  const auto now = RankSampler::Clock::now();
  if (now - window_start_ >= kWindow) {
    ObservationMsg m;
    m.window_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now - window_start_).count());
    std::map<pid_t, GpuProcessUsage> gpu = gpu_by_pid();
    std::map<pid_t, RankSocketsSample> sockets = sockets_by_pid();
    for (auto& [pid, w] : watched_) {
      const auto s = w.sampler.take(now);
      if (!s) continue;
      RankObservation o{w.rank, thousandths(s->busy), thousandths(s->starved), thousandths(s->waiting),
                        thousandths(s->own_data), thousandths(s->cpu_limit), s->cpu_ms, s->rss_kb, 0, "", 0, "", -1, 0};
      if (const auto c = sockets.find(pid); c != sockets.end() && c->second.sending > 0) {
        // An app-limited estimate is a floor of what the link can do: kept, as a slow link's is low
        // either way and a fast link's stays far above it.
        o.send_rate_kbs = static_cast<long long>(c->second.lowest_delivery_rate / 1000);
        o.send_peer = peer_address(c->second.slowest_peer);
        o.fast_rate_kbs = static_cast<long long>(c->second.highest_delivery_rate / 1000);
        o.fast_peer = peer_address(c->second.fastest_peer);
      }
      if (const auto g = gpu.find(pid); g != gpu.end()) {
        o.gpu_percent = g->second.sm_percent ? static_cast<int>(*g->second.sm_percent) : -1;
        o.gpu_mib = static_cast<long long>(g->second.memory_mib);
      }
      m.ranks.push_back(std::move(o));
    }
    window_start_ = now;
    if (!m.ranks.empty()) send_(std::move(m));
  }
  arm();
}

}  // namespace hvrun

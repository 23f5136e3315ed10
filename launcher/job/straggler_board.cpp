#include "launcher/job/straggler_board.hpp"

#include <algorithm>

namespace hvrun {

StragglerBoard::StragglerBoard(std::size_t hosts, StragglerWatch::Settings settings)
    : settings_(settings), watch_(settings), parts_(hosts) {}

std::vector<StragglerWatch::Event> StragglerBoard::report(std::size_t host, const std::string& name,
                                                          const ObservationMsg& m, Clock::time_point now,
                                                          const std::function<std::string(const std::string&)>& host_of) {
  if (host >= parts_.size()) parts_.resize(host + 1);
  Part& part = parts_[host];
  part = Part{};
  part.fresh = true;
  for (const RankObservation& r : m.ranks) {
    RankShares s;
    s.rank = r.rank;
    s.host = name;
    s.busy = r.busy / 1000.0;
    s.starved = r.starved / 1000.0;
    s.waiting = r.waiting / 1000.0;
    s.own_data = r.own_data / 1000.0;
    s.cpu_limit = r.cpu_limit / 1000.0;
    s.send_rate = static_cast<double>(r.send_rate_kbs) * 1000;
    s.fast_rate = static_cast<double>(r.fast_rate_kbs) * 1000;
    if (!r.send_peer.empty() && host_of) s.send_peer = host_of(r.send_peer);
    if (!r.fast_peer.empty() && host_of) s.fast_peer = host_of(r.fast_peer);
    part.ranks.push_back(s);
  }
  if (judged_ == Clock::time_point{}) judged_ = now;
  const bool complete = std::all_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.silent || p.fresh; });
  if (!complete && now - judged_ < 2 * settings_.window) return {};
  std::vector<RankShares> window;
  for (Part& p : parts_) {
    if (p.fresh) {
      window.insert(window.end(), p.ranks.begin(), p.ranks.end());
      p.fresh = false;
    } else if (!complete) {
      p = Part{};
      p.silent = true;
    }
  }
  std::sort(window.begin(), window.end(), [](const RankShares& a, const RankShares& b) { return a.rank < b.rank; });
  judged_ = now;
  return watch_.window(window, now);
}

}  // namespace hvrun

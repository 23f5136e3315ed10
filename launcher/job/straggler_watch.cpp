#include "launcher/job/straggler_watch.hpp"

#include <algorithm>
#include <set>
#include <cmath>
#include <cstdio>

namespace hvrun {

namespace {

std::string percent(double share) {
  return std::to_string(static_cast<int>(std::lround(std::clamp(share, 0.0, 1.0) * 100))) + " %";
}

std::string cpus(double n) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2g", n);
  return text;
}

// The median of `values` (not empty).
double median(std::vector<double> values) {
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (upper + *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

}  // namespace

const char* StragglerWatch::cause_name(Cause cause) {
  switch (cause) {
    case Cause::kComputes: return "computes";
    case Cause::kOwnData: return "waits for its own data";
    case Cause::kStarved: return "starved of CPU";
    case Cause::kLink: return "has a slow link";
  }
  return "?";
}

StragglerWatch::Cause StragglerWatch::cause_of(const RankShares& r) const {
  if (r.starved >= settings_.starved) return Cause::kStarved;
  if (r.own_data > r.busy) return Cause::kOwnData;
  return Cause::kComputes;
}

std::string StragglerWatch::onset_text(const RankShares& r, Cause cause, double others_wait) const {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(settings_.window * settings_.onset).count();
  const std::string head = "rank " + std::to_string(r.rank) + " on " + r.host + " holds the job back: ";
  const std::string others = " of the last " + std::to_string(seconds) + " s while the others wait " +
                             percent(others_wait) + " in their collectives";
  switch (cause) {
    case Cause::kStarved:
      return head + "busy " + percent(r.busy) + others + "; it waited for a CPU " + percent(r.starved) +
             " of the time" +
             (r.cpu_limit > 0 ? " and may use " + cpus(r.cpu_limit) + " of a CPU (its cgroup's quota)"
                              : " (the host's CPUs are taken by other work)");
    case Cause::kOwnData:
      return head + "waiting for its own data (file reads, the disk, sleeps) " + percent(r.own_data) + others +
             "; look at its data loading";
    case Cause::kComputes:
      return head + "busy " + percent(r.busy) + others + "; it computes more than they do (a slower device or "
             "more work on this rank)";
    case Cause::kLink:
      break;
  }
  return head;
}

std::vector<StragglerWatch::Event> StragglerWatch::window(const std::vector<RankShares>& ranks, Clock::time_point now) {
  std::vector<Event> events;
  // Ranks gone since (ended, restarted) are forgotten without a line: the job's own messages say why.
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    const bool present = std::any_of(ranks.begin(), ranks.end(), [&](const RankShares& r) { return r.rank == it->first; });
    it = present ? std::next(it) : tracks_.erase(it);
  }
  if (ranks.size() < 2) return events;
  judge_links(ranks, now, events);

  std::vector<bool> candidate(ranks.size(), false);
  std::vector<double> others_wait(ranks.size(), 0);
  std::size_t candidates = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    std::vector<double> others;
    others.reserve(ranks.size() - 1);
    for (std::size_t j = 0; j < ranks.size(); ++j)
      if (j != i) others.push_back(ranks[j].waiting);
    others_wait[i] = median(others);
    candidate[i] = others_wait[i] >= settings_.others_wait &&
                   ranks[i].waiting <= settings_.own_ratio * others_wait[i] &&
                   others_wait[i] - ranks[i].waiting >= settings_.gap;
    candidates += candidate[i] ? 1 : 0;
  }
  // More than half the job "held back by" the rest is no straggler: the others' median then is not the
  // waiting majority that names one.
  if (candidates * 2 > ranks.size()) std::fill(candidate.begin(), candidate.end(), false);

  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankShares& r = ranks[i];
    Track& t = tracks_[r.rank];
    if (candidate[i]) {
      ++t.streak;
      t.clear = 0;
      if (!t.named && t.streak >= settings_.onset) {
        t.named = true;
        t.cause = cause_of(r);
        auto& last = last_line_[{r.rank, t.cause}];
        t.said = last == Clock::time_point{} || now - last >= settings_.repeat;
        if (t.said) {
          last = now;
          events.push_back(Event{false, r.rank, r.host, t.cause, onset_text(r, t.cause, others_wait[i])});
        }
      }
    } else {
      t.streak = 0;
      if (t.named && ++t.clear >= settings_.recovery) {
        t.named = false;
        t.clear = 0;
        if (t.said)
          events.push_back(Event{true, r.rank, r.host, t.cause,
                                 "rank " + std::to_string(r.rank) + " on " + r.host +
                                     " no longer holds the job back (it " + cause_name(t.cause) + ")"});
      }
    }
  }
  return events;
}

namespace {

std::string mb_per_s_text(double bytes_per_s) {
  char buf[32];
  const double mb = bytes_per_s / 1e6;
  std::snprintf(buf, sizeof buf, mb >= 100 ? "%.0f MB/s" : mb >= 1 ? "%.1f MB/s" : "%.2f MB/s", mb);
  return buf;
}

}  // namespace

// A host whose every sending connection (its ranks' and its peers' towards it) is far slower than the
// connections between the other hosts, while the ranks wait on peers: its link holds the job back. Each
// rank gives its slowest and its fastest sending connection: edges (its host, the peer's host, the rate).
void StragglerWatch::judge_links(const std::vector<RankShares>& ranks, Clock::time_point now, std::vector<Event>& events) {
  struct Edge {
    std::string from, to;
    double rate;
  };
  std::vector<Edge> edges;
  std::vector<double> waits;
  std::set<std::string> hosts;
  for (const RankShares& r : ranks) {
    waits.push_back(r.waiting);
    for (const auto& [rate, peer] : {std::pair{r.send_rate, r.send_peer}, std::pair{r.fast_rate, r.fast_peer}}) {
      if (rate <= 0 || peer.empty() || peer == r.host) continue;
      edges.push_back({r.host, peer, rate});
      hosts.insert(r.host);
      hosts.insert(peer);
    }
  }
  const double job_wait = median(waits);
  for (const std::string& h : hosts) {
    std::vector<double> touching, others;
    for (const Edge& e : edges) (e.from == h || e.to == h ? touching : others).push_back(e.rate);
    const bool candidate = job_wait >= settings_.others_wait && !touching.empty() && !others.empty() &&
                           *std::max_element(touching.begin(), touching.end()) < settings_.slow_link * median(others);
    Track& t = link_tracks_[h];
    if (candidate) {
      t.clear = 0;
      if (!t.named && ++t.streak >= settings_.onset) {
        t.named = true;
        auto& last = link_last_line_[h];
        t.said = last == Clock::time_point{} || now - last >= settings_.repeat;
        if (t.said) {
          last = now;
          std::set<std::string> peers;
          for (const Edge& e : edges)
            if (e.from == h || e.to == h) peers.insert(e.from == h ? e.to : e.from);
          std::vector<std::string> peer_list(peers.begin(), peers.end());
          std::string joined;
          for (const auto& p : peer_list) joined += (joined.empty() ? "" : ", ") + p;
          events.push_back(Event{false, -1, h, Cause::kLink,
                                 "the network link of " + h + " holds the job back: its connections (with " + joined +
                                     ") carry " + mb_per_s_text(*std::max_element(touching.begin(), touching.end())) +
                                     " at most, the others' " + mb_per_s_text(median(others)) + ", while the ranks wait " +
                                     percent(job_wait) + " on peers; check " + h +
                                     "'s NIC (ethtool: speed, errors) and any shaping on it (tc qdisc)"});
        }
      }
    } else {
      t.streak = 0;
      if (t.named && ++t.clear >= settings_.recovery) {
        t.named = false;
        t.clear = 0;
        if (t.said) events.push_back(Event{true, -1, h, Cause::kLink, "the network link of " + h + " no longer holds the job back"});
      }
    }
  }
}

std::vector<int> StragglerWatch::named() const {
  std::vector<int> out;
  for (const auto& [rank, t] : tracks_)
    if (t.named) out.push_back(rank);
  return out;
}

}  // namespace hvrun

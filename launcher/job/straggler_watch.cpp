#include "launcher/job/straggler_watch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "launcher/base/text_layout.hpp"
#include "launcher/nic/link_speed.hpp"

namespace hvrun {

namespace {

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
                             percent_text(others_wait) + " in their collectives";
  switch (cause) {
    case Cause::kStarved:
      return head + "busy " + percent_text(r.busy) + others + "; it waited for a CPU " + percent_text(r.starved) +
             " of the time" +
             (r.cpu_limit > 0 ? " and may use " + cpus(r.cpu_limit) + " of a CPU (its cgroup's quota)"
                              : " (the host's CPUs are taken by other work)");
    case Cause::kOwnData:
      return head + "waiting for its own data (file reads, the disk, sleeps) " + percent_text(r.own_data) + others +
             "; look at its data loading";
    case Cause::kComputes:
      return head + "busy " + percent_text(r.busy) + others + "; it computes more than they do (a slower device or "
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
    switch (step(t, candidate[i])) {
      case Turn::kOnset:
        t.cause = cause_of(r);
        t.said = may_say(last_line_[{r.rank, t.cause}], now);
        if (t.said) events.push_back(Event{false, r.rank, r.host, t.cause, onset_text(r, t.cause, others_wait[i])});
        break;
      case Turn::kRecovered:
        events.push_back(Event{true, r.rank, r.host, t.cause,
                               "rank " + std::to_string(r.rank) + " on " + r.host + " no longer holds the job back (it " +
                                   cause_name(t.cause) + ")"});
        break;
      case Turn::kNone:
        break;
    }
  }
  return events;
}

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
    const Turn turn = step(t, candidate);
    if (turn == Turn::kOnset && (t.said = may_say(link_last_line_[h], now))) {
      std::vector<std::string> peers;
      for (const Edge& e : edges)
        if (e.from == h || e.to == h) peers.push_back(e.from == h ? e.to : e.from);
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      events.push_back(Event{false, -1, h, Cause::kLink,
                             "the network link of " + h + " holds the job back: its connections (with " +
                                 join_words(peers) + ") carry " +
                                 rate_text(*std::max_element(touching.begin(), touching.end()) / 1e6) +
                                 " at most, the others' " + rate_text(median(others) / 1e6) + ", while the ranks wait " +
                                 percent_text(job_wait) + " on peers; check " + h +
                                 "'s NIC (ethtool: speed, errors) and any shaping on it (tc qdisc)"});
    }
    if (turn == Turn::kRecovered)
      events.push_back(Event{true, -1, h, Cause::kLink, "the network link of " + h + " no longer holds the job back"});
  }
}

StragglerWatch::Turn StragglerWatch::step(Track& t, bool candidate) const {
  if (candidate) {
    t.clear = 0;
    if (t.named || ++t.streak < settings_.onset) return Turn::kNone;
    t.named = true;
    return Turn::kOnset;
  }
  t.streak = 0;
  if (!t.named || ++t.clear < settings_.recovery) return Turn::kNone;
  t.named = false;
  t.clear = 0;
  return t.said ? Turn::kRecovered : Turn::kNone;
}

bool StragglerWatch::may_say(Clock::time_point& last, Clock::time_point now) const {
  if (last != Clock::time_point{} && now - last < settings_.repeat) return false;
  last = now;
  return true;
}

std::vector<int> StragglerWatch::named() const {
  std::vector<int> out;
  for (const auto& [rank, t] : tracks_)
    if (t.named) out.push_back(rank);
  return out;
}

}  // namespace hvrun

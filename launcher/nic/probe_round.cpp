#include "launcher/nic/probe_round.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "common/invariant.hpp"
#include "launcher/nic/probe_peers.hpp"
#include "launcher/nic/probe_retry.hpp"

namespace hvrun {

namespace {

using ProbeKey = std::tuple<std::size_t, std::size_t, std::string>;  // (from, to, address)

}  // namespace

ProbeRound::ProbeRound(std::vector<std::size_t> members, std::vector<HostInventory> inventories, NicFilter filter,
                       bool single_host, std::size_t peers, bool final_early)
    : members_(std::move(members)),
      inventories_(std::move(inventories)),
      filter_(std::move(filter)),
      single_host_(single_host),
      final_early_(final_early),
      targets_(probe_targets(inventories_, filter_, single_host_)),
      probers_(choose_probe_peers(inventories_, targets_, peers, 0)) {
  // probe_targets lists each NIC's addresses together, in the order they are offered.
  next_address_.assign(targets_.size(), std::string::npos);
  released_.assign(targets_.size(), !final_early_);
  for (std::size_t ti = 0; ti < targets_.size(); ++ti) {
    target_at_.emplace(std::make_pair(targets_[ti].host, targets_[ti].address), ti);
    const bool same_nic = ti > 0 && targets_[ti - 1].host == targets_[ti].host && targets_[ti - 1].iface == targets_[ti].iface;
    if (same_nic) next_address_[ti - 1] = ti;
    else released_[ti] = true;
  }
  for (const std::size_t ti : probe_order(inventories_, targets_, filter_, single_host_))
    if (released_[ti])
      for (const std::size_t m : probers_[targets_[ti].host]) planned_.emplace_back(m, ti);
  sent_ = planned_.size();
  for (const auto& [m, ti] : planned_) ++unanswered_[{m, targets_[ti].host, targets_[ti].address}];
  outstanding_ = planned_.size();
}

void ProbeRound::release(std::size_t target) {
  released_[target] = true;
  for (const std::size_t m : probers_[targets_[target].host]) {
    planned_.emplace_back(m, target);
    fresh_.emplace_back(m, target);
    ++unanswered_[{m, targets_[target].host, targets_[target].address}];
    ++outstanding_;
    ++sent_;
  }
}

std::vector<ProbeRound::Probe> ProbeRound::take_released() { return std::exchange(fresh_, {}); }

std::optional<std::size_t> ProbeRound::member_of(std::size_t host) const {
  const auto it = std::find(members_.begin(), members_.end(), host);
  if (it == members_.end()) return std::nullopt;
  return static_cast<std::size_t>(it - members_.begin());
}

bool ProbeRound::add(ProbeResult result) {
  if (result.outcome != ProbeOutcome::kOk && !judged_)
    if (const auto t = target_at_.find({result.to, result.address}); t != target_at_.end()) {
      const std::size_t next = next_address_[t->second];
      if (next != std::string::npos && !released_[next]) release(next);
    }
  ProbeKey key{result.from, result.to, result.address};
  if (auto it = unanswered_.find(key); it != unanswered_.end() && it->second > 0) {
    --it->second;
    --outstanding_;
  }
  if (auto at = result_at_.find(key); at != result_at_.end()) {
    results_[at->second] = std::move(result);
  } else {
    result_at_.emplace(std::move(key), results_.size());
    results_.push_back(std::move(result));
  }
  return outstanding_ == 0;
}

bool ProbeRound::decision_is_final() const {
  if (!final_early_) return false;
  std::set<ProbeKey> arrived;
  for (const ProbeResult& r : results_) arrived.emplace(r.from, r.to, r.address);
  std::vector<ProbeResult> optimistic = results_;
  for (const auto& [from, t] : planned_) {
    const ProbeTarget& target = targets_[t];
    if (arrived.count({from, target.host, target.address})) continue;
    ProbeResult ok;
    ok.from = from;
    ok.to = target.host;
    ok.iface = target.iface;
    ok.address = target.address;
    ok.outcome = ProbeOutcome::kOk;
    optimistic.push_back(std::move(ok));
  }
  const auto worst = select_nics(inventories_, targets_, results_, filter_, single_host_, probers_);
  const auto best = select_nics(inventories_, targets_, optimistic, filter_, single_host_, probers_);
  for (std::size_t i = 0; i < worst.size(); ++i)
    if (!worst[i].selected || !best[i].selected || !(*worst[i].selected == *best[i].selected)) return false;
  return true;
}

void ProbeRound::decide() {
  selections_ = select_nics(inventories_, targets_, results_, filter_, single_host_, probers_);
  judged_ = true;
}

void ProbeRound::adopt(const std::vector<CachedSelection>& cached) {
  HVRUN_INVARIANT_MSG(cached.size() == members_.size() && results_.empty(),
                      std::to_string(cached.size()) + " cached selections for " + std::to_string(members_.size()) +
                          " members");
  selections_.clear();
  for (const CachedSelection& c : cached) {
    HostSelection s;
    for (const NicChoice& u : c.usable) {
      NicVerdict v;
      v.iface = u.iface;
      v.address = u.address;
      v.addresses = {u.address};
      v.usable = true;
      s.nics.push_back(std::move(v));
    }
    s.selected = c.selected;
    selections_.push_back(std::move(s));
  }
  planned_.clear();
  fresh_.clear();
  unanswered_.clear();
  outstanding_ = 0;
  sent_ = 0;
  judged_ = true;
}

std::vector<ProbeRound::Probe> ProbeRound::retry() {
  if (attempts_ >= kMaxProbeAttempts || every_member_chosen()) return {};
  auto again = probes_to_retry(targets_, results_, selections_);
  if (again.empty()) return {};
  std::set<ProbeKey> retried;
  for (const auto& [m, ti] : again) retried.emplace(m, targets_[ti].host, targets_[ti].address);
  std::erase_if(results_, [&](const ProbeResult& r) { return retried.count({r.from, r.to, r.address}) > 0; });
  result_at_.clear();
  for (std::size_t i = 0; i < results_.size(); ++i)
    result_at_.emplace(ProbeKey{results_[i].from, results_[i].to, results_[i].address}, i);
  for (const ProbeKey& key : retried) ++unanswered_[key];
  outstanding_ += retried.size();
  ++attempts_;
  sent_ += again.size();
  judged_ = false;
  return again;
}

std::optional<NicChoice> ProbeRound::choice_of(std::size_t host) const {
  const auto m = member_of(host);
  if (!m || *m >= selections_.size()) return std::nullopt;
  return selections_[*m].selected;
}

bool ProbeRound::every_member_chosen() const {
  return std::all_of(selections_.begin(), selections_.end(),
                     [](const HostSelection& s) { return s.selected.has_value(); });
}

}  // namespace hvrun

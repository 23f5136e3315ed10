#include "launcher/nic/verdict_groups.hpp"

#include <array>

#include "launcher/base/host_names.hpp"

namespace hvrun {

std::vector<PeerGroup> group_peers(const NicVerdict& verdict) {
  static constexpr std::array<ProbeOutcome, 6> kOrder{ProbeOutcome::kOk,         ProbeOutcome::kWrongHost,
                                                      ProbeOutcome::kAuthFailed, ProbeOutcome::kRefused,
                                                      ProbeOutcome::kTimeout,    ProbeOutcome::kUnreachable};
  std::vector<PeerGroup> out;
  for (const ProbeOutcome o : kOrder) {
    PeerGroup g{o, {}};
    for (const PeerView& p : verdict.peers)
      if (p.outcome == o) g.peers.push_back(p.peer_host);
    if (!g.peers.empty()) out.push_back(std::move(g));
  }
  PeerGroup missing{std::nullopt, {}};
  for (const PeerView& p : verdict.peers)
    if (!p.outcome) missing.peers.push_back(p.peer_host);
  if (!missing.peers.empty()) out.push_back(std::move(missing));
  return out;
}

std::string grouped_outcomes(const NicVerdict& verdict) {
  const auto groups = group_peers(verdict);
  const std::size_t total = verdict.peers.size();
  if (total == 0) return "no other host to probe it";
  const auto word = [](const PeerGroup& g) { return g.outcome ? std::string(to_string(*g.outcome)) : "not probed"; };
  if (groups.size() == 1) {
    const auto& g = groups.front();
    if (g.outcome == ProbeOutcome::kOk)
      return total == 1 ? "ok from " + g.peers.front() : "ok from all " + std::to_string(total) + " hosts";
    return word(g) + (total == 1 ? " from " + g.peers.front() : " from all");
  }
  std::string out;
  std::size_t ok = 0;
  for (const auto& g : groups) {
    if (g.outcome == ProbeOutcome::kOk) {
      ok = g.peers.size();
      continue;
    }
    out += (out.empty() ? "" : "; ") + word(g) + " from " + fold_names(g.peers);
  }
  if (ok > 0) out += " (ok from the other " + std::to_string(ok) + ")";
  return out;
}

std::string outcome_meaning(ProbeOutcome outcome, const std::string& address, bool on_every_host) {
  switch (outcome) {
    case ProbeOutcome::kOk:
      return "reached";
    case ProbeOutcome::kWrongHost:
      return on_every_host ? address + " is on every host (probes land on the prober)"
                           : "another host answered: " + address + " is held elsewhere too";
    case ProbeOutcome::kAuthFailed:
      return "answered without a valid HMAC: another job or program on that port";
    case ProbeOutcome::kRefused:
      return "refused: a firewall rejects it, or nothing listens there";
    case ProbeOutcome::kTimeout:
      return "no answer within the probe timeout: packets dropped on the way (a firewall?)";
    case ProbeOutcome::kUnreachable:
      return "no route to it from there";
  }
  return "?";
}

char outcome_char(std::optional<ProbeOutcome> outcome) {
  if (!outcome) return '?';
  switch (*outcome) {
    case ProbeOutcome::kOk:
      return '.';
    case ProbeOutcome::kTimeout:
      return 't';
    case ProbeOutcome::kRefused:
      return 'r';
    case ProbeOutcome::kUnreachable:
      return 'u';
    case ProbeOutcome::kWrongHost:
      return 'w';
    case ProbeOutcome::kAuthFailed:
      return 'a';
  }
  return '?';
}

}  // namespace hvrun

#include "launcher/job/probe_messages.hpp"

#include "common/error.hpp"

namespace hvrun {

namespace {

std::size_t member_of(const ProbeRound& round, const std::vector<JobHost>& hosts, std::size_t host) {
  const auto m = round.member_of(host);
  if (!m) throw ProtocolError(hosts[host].name + ": probe result about a host without an agent");
  return *m;
}

}  // namespace

ProbeMembers probe_members(const std::vector<JobHost>& hosts) {
  ProbeMembers p;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (!hosts[i].life.ready()) continue;
    p.hosts.push_back(i);
    p.inventories.push_back(HostInventory{hosts[i].name, hosts[i].hello->hostname, hosts[i].hello->interfaces});
  }
  return p;
}

std::string probe_scope(std::size_t peers, std::size_t members) {
  return peers == 0 || members <= peers + 1 ? std::string("every pair")
                                            : "each host from " + std::to_string(peers) + "+ peers";
}

std::vector<ProbeRequestMsg> probe_requests(const ProbeRound& round, const std::vector<ProbeRound::Probe>& probes,
                                            const std::vector<JobHost>& hosts, std::chrono::milliseconds timeout) {
  const auto& members = round.members();
  std::vector<ProbeRequestMsg> requests(members.size());
  for (const auto& [m, ti] : probes) {
    const ProbeTarget& t = round.targets()[ti];
    const JobHost& peer = hosts[members[t.host]];
    requests[m].targets.push_back(
        ProbeAddress{static_cast<int>(members[t.host]), t.iface, t.address, peer.hello->probe_port});
  }
  for (auto& r : requests) r.timeout_ms = static_cast<int>(timeout.count());
  return requests;
}

ProbeResult probe_result(const ProbeRound& round, const std::vector<JobHost>& hosts, std::size_t from,
                         const ProbeResultMsg& m, const std::string& peer) {
  if (m.host < 0 || static_cast<std::size_t>(m.host) >= hosts.size())
    throw ProtocolError(peer + ": probe result for an unknown host");
  ProbeResult r;
  r.from = member_of(round, hosts, from);
  r.to = member_of(round, hosts, static_cast<std::size_t>(m.host));
  r.iface = m.iface;
  r.address = m.address;
  r.outcome = m.outcome;
  if (m.answered_as >= 0 && static_cast<std::size_t>(m.answered_as) < hosts.size())
    r.answered_as = hosts[static_cast<std::size_t>(m.answered_as)].name;
  r.elapsed = std::chrono::milliseconds(m.elapsed_ms);
  r.detail = m.detail;
  return r;
}

}  // namespace hvrun

#pragma once
// The probe round (probe_round.hpp) on the wire: which hosts take part, the ProbeRequestMsg each
// prober gets, and a ProbeResultMsg read back into a ProbeResult. Host indices on the wire are the
// job's; the round counts its members.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/nic/nic_selector.hpp"
#include "launcher/nic/probe_round.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

// Only hosts with an agent take part (hello and ready); under --check-only the others are reported as
// SSH failures.
struct ProbeMembers {
  std::vector<std::size_t> hosts;  // job indices
  std::vector<HostInventory> inventories;
};
ProbeMembers probe_members(const std::vector<JobHost>& hosts);

// "every pair", or "each host from 3+ peers" when `peers` (0: all pairs) bounds a larger round.
std::string probe_scope(std::size_t peers, std::size_t members);

// Each member's share of `probes`, in the order given (empty requests are not sent).
std::vector<ProbeRequestMsg> probe_requests(const ProbeRound& round, const std::vector<ProbeRound::Probe>& probes,
                                            const std::vector<JobHost>& hosts, std::chrono::milliseconds timeout);

// The result the agent of hosts[from] (`peer` in messages) reported, its detail included. Throws
// ProtocolError for an unknown host or a host without an agent (an unknown outcome word never decodes).
ProbeResult probe_result(const ProbeRound& round, const std::vector<JobHost>& hosts, std::size_t from,
                         const ProbeResultMsg& m, const std::string& peer);

}  // namespace hvrun

#pragma once
// A NIC's verdict grouped by outcome instead of listed per peer, for reports that must stay short at
// hundreds of hosts: "ok from all 63 hosts", "timeout from lab7, lab12 (ok from the other 61)".
#include <optional>
#include <string>
#include <vector>

#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

// The peers that got one outcome probing a NIC.
struct PeerGroup {
  std::optional<ProbeOutcome> outcome;  // nullopt: those peers reported no probe of it
  std::vector<std::string> peers;       // names as in -H, in host order
};

// The verdict's peers by outcome: `ok` first, then the failures in ProbeOutcome's order, then the
// peers that did not probe it. Empty groups are left out.
std::vector<PeerGroup> group_peers(const NicVerdict& verdict);

// The grouped verdict in words, without the NIC's name: "ok from all 31 hosts",
// "timeout from lab7 (ok from the other 30)", "wrong-host from all", "refused from a; timeout from b, c
// (ok from the other 4)". Peer lists are folded (fold_names).
std::string grouped_outcomes(const NicVerdict& verdict);

// What a failing outcome usually means, for a person: "no answer within the probe timeout: packets
// dropped on the way (a firewall?)". `address` and `on_every_host` make the wrong-host case precise.
std::string outcome_meaning(ProbeOutcome outcome, const std::string& address, bool on_every_host);

// A single character for the outcome, for matrices: '.' ok, 't' timeout, 'r' refused, 'u' unreachable,
// 'w' wrong-host, 'a' auth-failed; '?' for nullopt (not probed).
char outcome_char(std::optional<ProbeOutcome> outcome);

}  // namespace hvrun

#pragma once
// Which hosts probe which: the bounded probe set (docs/DESIGN.md §5.2, §5.3). Probing every candidate
// address of every host from every other host costs n² probes (64 hosts with 7 addresses each: 28,000);
// a launch instead has each host's addresses probed by a few peers, so the probes grow as n·k. Pure
// logic: the job sends the probes, select_nics judges them against this set.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

// A launch's default --probe-peers: the two ring neighbours and two seeded-random peers per host.
inline constexpr std::size_t kDefaultProbePeers = 4;

// The peer count a job uses: --probe-peers when given (0: all pairs), else all pairs for --check-only
// (a diagnosis reports every pair) and kDefaultProbePeers for a launch.
std::size_t probe_peer_count(std::optional<int> flag, bool check_only);

// probers[h]: the hosts (indices into `hosts`, ascending, never h) that probe every target of host h.
// With `peers` == 0 or n <= peers + 1 hosts: every other host (all pairs). Otherwise host h is probed by
//   - its ring neighbours in host order, h-1 and h+1 (only h-1 when peers == 1);
//   - seeded-random other hosts until it has `peers` probers (the same seed and host list give the
//     same set: a failure can be reproduced);
//   - for every subnet that a target of h lies in (the NIC's address and prefix length), one host with
//     a target in that subnet when no prober has one yet, the first after h in ring order: a NIC on a
//     subnet only some hosts share is verified from inside that subnet.
// So every host has at least min(peers, n-1) probers and at most peers + its number of subnets; the
// probes sent are sum over h of |probers[h]| × targets of h, O(n·peers) for a bounded NIC count.
std::vector<std::vector<std::size_t>> choose_probe_peers(const std::vector<HostInventory>& hosts,
                                                         const std::vector<ProbeTarget>& targets, std::size_t peers,
                                                         std::uint64_t seed);

// The number of probes `probers` asks for: each target probed by each prober of its host.
std::size_t probe_count(const std::vector<ProbeTarget>& targets, const std::vector<std::vector<std::size_t>>& probers);

}  // namespace hvrun

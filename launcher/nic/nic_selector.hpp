#pragma once
// The NIC each host uses, chosen from what the agents reported (inventories) and what the probes
// between hosts found. Pure logic: the probing itself happens elsewhere; this decides what to probe
// and what the results mean, and says why in words a user can act on.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/interface_list.hpp"
#include "common/probe_message.hpp"
#include "launcher/nic/ip_subnet.hpp"
#include "launcher/nic/nic_filter.hpp"

namespace hvrun {

// One address of one host that the other hosts should probe.
struct ProbeTarget {
  std::size_t host = 0;  // index into the inventories
  std::string iface;
  std::string address;   // as list_interfaces writes it (link-local IPv6 with "%iface" of its owner)
  bool operator==(const ProbeTarget&) const = default;
};

// What host `from` saw when probing `address` of host `to`'s NIC `iface`.
struct ProbeResult {
  std::size_t from = 0;
  std::size_t to = 0;
  std::string iface;
  std::string address;
  ProbeOutcome outcome = ProbeOutcome::kTimeout;
  std::string answered_as;  // kWrongHost: the identity that answered (a HostInventory host or hostname)
  std::chrono::milliseconds elapsed{0};
  std::string detail;  // the prober's words on a failure ("Connection refused"); "" for ok
};

// What one host's agent reported.
struct HostInventory {
  std::string host;      // as in -H
  std::string hostname;  // the agent's gethostname(); may differ from `host`; "" if unknown
  std::vector<InterfaceInfo> interfaces;  // in the kernel's order
};

// The best one peer got from any address of a NIC.
struct PeerView {
  std::size_t peer = 0;                 // index into the inventories
  std::string peer_host;                // its name as in -H
  std::optional<ProbeOutcome> outcome;  // nullopt: that peer reported no probe of this NIC
  std::string address;                  // the address that outcome belongs to
  std::string answered_as;
  std::chrono::milliseconds elapsed{0};
  std::string detail;  // that outcome's ProbeResult::detail
};

// The verdict on one candidate NIC of a host (up, running, allowed by the filter, not loopback unless
// single-host, with an address to offer).
struct NicVerdict {
  std::string iface;
  std::string address;                 // usable: the first address every peer reached; else the first probed
  std::vector<std::string> addresses;  // every address probed, in probe order
  bool usable = false;                 // some address was reached with `ok` from every prober of its host
  std::vector<PeerView> peers;         // every prober of its host (all pairs: every other host), in host order
  // Unusable: why, in words naming the peers ("no answer within 1 s from a, b: packets dropped?");
  // nic_summary() puts the NIC, address and host in front. Empty when usable.
  std::string reason;
};

// Why a NIC of a host is not a candidate. Data, so that reports can say the same reason once for every
// host that has it; skip_reason_text() gives the words.
enum class SkipReason {
  kNotOffered,         // no other reason known
  kExcluded,           // an exclusion of --network-interface matches it
  kNotNamed,           // --network-interface has inclusions and none matches it
  kLoopback,           // loopback with several hosts: reaches only its own host
  kDown,               // administratively down
  kNoCarrier,          // up but not running: no cable, no link partner
  kLinkLocalOnly,      // only link-local addresses: scoped to one link, named by the owner's interface
  kBridgePort,         // enslaved to a bridge: its traffic is the bridge's, the bridge is the candidate
  kNoAddressInSubnet,  // --network-interface names subnets and none of its addresses is inside one
};
const char* to_string(SkipReason reason);  // a short key: "link-local-only", "no-carrier", ...
const char* skip_reason_text(SkipReason reason);  // the words: "no carrier (up but not running)", ...

// A NIC of a host that was not a candidate, and why ("loopback", "down", "excluded by ...").
struct SkippedNic {
  std::string iface;
  std::string address;  // its first address, for reports
  std::string why;      // skip_reason_text(reason), or a more particular sentence
  SkipReason reason = SkipReason::kNotOffered;
};

struct NicChoice {
  std::string iface;
  std::string address;
  std::string why;  // why this one over the runner-up: "the only usable NIC", "faster than eth2 (...)"
  bool operator==(const NicChoice& o) const { return iface == o.iface && address == o.address; }
};

struct HostSelection {
  std::vector<NicVerdict> nics;     // candidates, in the kernel's order
  std::vector<SkippedNic> skipped;  // the host's other NICs, in the kernel's order
  std::optional<NicChoice> selected;
};

// At most this many addresses of one NIC are offered: IPv4 first, then global IPv6.
inline constexpr std::size_t kMaxAddressesPerNic = 4;

// The addresses each host offers to be probed: those of NICs that are up and running and pass the
// filter, never loopback unless `single_host`; per NIC its IPv4 addresses and global IPv6 ones (the
// first of each family first), at most kMaxAddressesPerNic; never a NIC enslaved to a bridge
// (SkipReason::kBridgePort: docker0's container veths carry no address of their own). Link-local IPv6
// addresses are never offered: a NIC with nothing else is skipped (SkipReason::kLinkLocalOnly), since
// such an address is scoped to one link and the prober would have to name its own interface on that
// link. With one host nobody probes; its targets still name its candidates.
// Throws UsageError when the filter has inclusions and a host has no NIC matching any of them:
// "--network-interface: host b has no NIC matching 'enp6s0' (it has: eth1, docker0, lo)". A host
// lacking some of several names is fine: `enp6s0,enp5s0` is how differing names are given.
std::vector<ProbeTarget> probe_targets(const std::vector<HostInventory>& hosts, const NicFilter& filter,
                                       bool single_host);

// The order in which to start the probes of `targets` (indices into it): first the addresses that
// decide the choices, i.e. every host's most preferred NIC (select_nics's ranking) with its first
// address, then its next address, then the second NIC, and so on. Every target is still probed; on a
// busy machine the probes started first are answered first, so a launch can decide sooner.
std::vector<std::size_t> probe_order(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                     const NicFilter& filter, bool single_host);

// One selection per host, parallel to `hosts`. A candidate (a NIC with targets) is usable when one of
// its addresses was reached with `ok` from every one of its host's probers: `probers[h]` (the bounded
// set of probe_peers.hpp) when given, else every other host; with a single host every candidate is
// usable without probes. Results from hosts that are not probers of the host probed are ignored.
// Among usable NICs a host prefers, in this order: the earlier inclusion of the filter; loopback on a
// single host and not loopback otherwise; physical over virtual, where a container or VM bridge by
// name (docker*, veth*, virbr*, br-*, ...) ranks below any other virtual NIC; higher speed (unknown
// counts as slowest); the kernel's order. Each host chooses on its own.
std::vector<HostSelection> select_nics(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                       const std::vector<ProbeResult>& results, const NicFilter& filter,
                                       bool single_host, const std::vector<std::vector<std::size_t>>& probers = {});

// "docker0 172.17.0.1 on b: answered as the prober itself (from a, c): ..." — one line for messages.
std::string nic_summary(const std::string& host, const NicVerdict& verdict);

// True for names of container and VM plumbing: docker*, veth*, virbr*, br-*, vnet*, cni*, flannel*,
// cali*, lxcbr*, lxdbr*, podman*.
bool has_virtual_name(const std::string& iface);

// The IPv4 subnet every host's selected address lies in, with the same prefix length on every host
// (for Open MPI's btl_tcp_if_include); nullopt when a host has no selection, an IPv6 one, an unknown
// prefix length, or when the subnets differ.
std::optional<IpSubnet> shared_ipv4_subnet(const std::vector<HostInventory>& hosts,
                                           const std::vector<HostSelection>& selections);

}  // namespace hvrun

#pragma once
// The default text of `hvrun --check-only`: short at any number of hosts. A verdict line first (and
// the hosts that are not ready, with the cause), one line per host with its NIC (packed in columns
// beyond 64 hosts), the settings for other tools, then only what is not fine: the traps every host
// shares said once, the rest grouped by NIC and outcome. Every line fits `width` columns.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "launcher/check/check_input.hpp"

namespace hvrun {

// The NIC a picture of host `h` shows: its selected one, else the candidate most peers reached (the
// first of equals); nullptr when it has no candidate.
const NicVerdict* shown_nic(const HostCheck& h);

// For each host of `in` (by index), its view of `verdict`'s NIC; nullptr for the NIC's own host and
// for hosts that are not among its peers. One pass over the peers: pictures of n hosts cost n^2.
std::vector<const PeerView*> views_by_host(const CheckInput& in, const NicVerdict& verdict);

// A pair of hosts between which probes fail in one direction only: `to`'s shown NIC was not reached
// from `from`, while `from`'s was reached from `to`. Hosts as indices into CheckInput::hosts.
struct OneWayPair {
  std::size_t from = 0;
  std::size_t to = 0;
  ProbeOutcome outcome = ProbeOutcome::kTimeout;  // what `from` got
};
std::vector<OneWayPair> one_way_pairs(const CheckInput& in);

// The link test's figures (link_speed.hpp): "links, each host to the next ...: N pairs, SLOWEST to FASTEST",
// a line per pair when `every_pair`, then link_warnings' lines; "" when it did not run.
std::string link_lines(const CheckInput& in, std::size_t width, bool every_pair);

// `settings` is CheckReport::settings() (empty unless every host is usable).
std::string check_summary(const CheckInput& in, const ToolSettings& settings, std::size_t width);

// The one-line cause for each host that is not ready ("hvchk-h5: no usable NIC: eth1 10.77.0.15:
// timeout from hvchk-h6 (ok from the other 30)"), in host order.
std::vector<std::string> not_ready_lines(const CheckInput& in);

}  // namespace hvrun

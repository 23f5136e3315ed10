#pragma once
// A probe is not a verdict. One dropped SYN costs TCP's 1 s initial retransmission, exactly the default
// probe timeout, and on a busy fabric (dozens of hosts probing each other at once) some SYNs drop; an
// address whose neighbour (ARP, NDP) resolution failed once answers "no route to host" at once until the
// kernel resolves it again, which the next packet starts. So before a launch gives up for lack of a
// usable NIC, the probes that timed out or found no route towards hosts without a usable NIC are sent
// again, each attempt with twice the timeout of the one before, at most kMaxProbeAttempts in all. A
// launch where every host has a usable NIC never waits for this: a NIC that really drops packets still
// costs one probe timeout, and a refusal (something answered) is never sent again.
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

inline constexpr int kMaxProbeAttempts = 3;  // the first probe and two retries: 1 + 2 + 4 = 7 timeouts' worth

// The timeout of attempt `attempt` (1-based): base, 2 base, 4 base, ...
std::chrono::milliseconds attempt_timeout(std::chrono::milliseconds base, int attempt);

// "3 probe attempts (timeouts 1 s, 2 s, 4 s)" for messages; "1 probe attempt (timeout 1 s)".
std::string attempts_text(std::chrono::milliseconds base, int attempts);

// (prober, index into targets) of every probe to send again, each once, sorted: its result was a
// timeout or no route (kUnreachable), and the host it probed has no usable NIC in `selections` (parallel to the hosts of
// `targets`). O(results · log targets).
std::vector<std::pair<std::size_t, std::size_t>> probes_to_retry(const std::vector<ProbeTarget>& targets,
                                                                 const std::vector<ProbeResult>& results,
                                                                 const std::vector<HostSelection>& selections);

}  // namespace hvrun

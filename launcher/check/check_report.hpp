#pragma once
// What `hvrun --check-only` prints (text or JSON), and the explanation a launch prints when some host
// has no usable NIC. Pure rendering: the facts come from SSH, the agents and select_nics().
#include <cstddef>
#include <string>

#include "launcher/base/exit_codes.hpp"
#include "launcher/check/check_input.hpp"

namespace hvrun {

class CheckReport {
 public:
  explicit CheckReport(CheckInput input);

  // Every host came up over SSH and has a selected NIC.
  bool all_usable() const;
  int exit_code() const { return all_usable() ? kExitOk : kExitLaunchFailed; }

  // For people, short at any size (check_summary.hpp): the verdict and what is wrong first, one line
  // per host, the settings, the traps grouped; lines of at most `width` columns.
  std::string summary(std::size_t width) const;

  // --verbose: per host the SSH result and agent version; per NIC its address, one word per peer
  // (ok, timeout, ...) and the reason for failures; what was not considered and why; the choice per
  // host; then either the settings for other tools or why_unusable().
  std::string listing() const;

  // --matrix: who reaches whom, one character per host pair (check_matrix.hpp).
  std::string matrix(bool colour, std::size_t width) const;

  // --report FILE: one self-contained HTML page (check_html.hpp).
  std::string html() const;

  // For programs, indented JSON:
  //   {"ok": bool, "probe_ms": int,
  //    "hosts": [{"host": str, "ssh": {"ok": bool, "error": str|null}, "agent_version": str|null,
  //               "interfaces": [{"name": str, "address": str, "usable": bool, "reason": str|null,
  //                               "probed": bool, "selected": bool, "addresses": [str],
  //                               "peers": [{"host": str, "outcome": str|null}]}],
  //               "selected": {"interface": str, "address": str, "why": str} | null}],
  //    "settings": {"network_interface": str, "nccl_socket_ifname": {host: str},
  //                 "open_mpi_if_include": str|null} | null,
  //    "not_ready": [str],                       // one line per host without a usable NIC (summary)
  //    "one_way": [{"from": str, "to": str, "outcome": str}],  // from -> to fails, to -> from is ok
  //    "grouped": [{"host": str, "interface": str, "address": str, "verdict": str}],  // every candidate:
  //                                               // "ok from all 31 hosts", "timeout from b (ok from the other 2)"
  //    "links": [{"from": str, "to": str, "interface": str, "address": str, "to_address": str,
  //               "bytes": int, "seconds": float, "mb_per_s": float|null, "error": str|null}]}
  //                                               // the link test, each host to the next; [] when it did not run
  // "hosts" in -H order; "interfaces" in the kernel's order, NICs that were not probed included
  // (usable false, the reason why not); "settings" null unless "ok".
  std::string json() const;

  // Why some host has no usable NIC and what to try: a line per failing host with the reason of each
  // of its NICs, then the hints (firewalls between named hosts, NICs the filter left out). "" when
  // all_usable().
  std::string why_unusable() const;

  // What pins other tools to the chosen NICs. The hvrun value is the chosen names as exact matches
  // when that selects exactly the chosen NIC among every host's candidates, else the shared subnet if
  // that does, else the names anyway.
  ToolSettings settings() const;

 private:
  CheckInput in_;
};

}  // namespace hvrun

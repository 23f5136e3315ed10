#pragma once
// The link test's plan and verdict (docs/DESIGN.md §5.6), pure: which host measures which (the ring of
// the host list), and, from the recorded figures, which links look degraded, in the words hvrun warns
// with. The measuring itself is the agents' (agent/link_tester.hpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hvrun {

// One host as the link test names it: its name in -H and its chosen NIC.
struct LinkHost {
  std::string name;
  std::string iface;
  std::string address;
};

// What `from` measured towards `to` (indexes into the hosts): the bytes `to` confirmed over the
// microseconds from the first byte to its answer; or `error`, "no figure".
struct LinkFigure {
  std::size_t from = 0;
  std::size_t to = 0;
  std::int64_t bytes = 0;
  std::int64_t micros = 0;
  std::string error;
  bool measured() const { return error.empty() && micros > 0; }
  double mb_per_s() const { return measured() ? static_cast<double>(bytes) / static_cast<double>(micros) : 0.0; }
};

// The pairs of `hosts` hosts in -H order: host i sends to host i+1 (the last to the first); with two
// hosts, one pair each way; none for fewer.
std::vector<std::pair<std::size_t, std::size_t>> link_ring(std::size_t hosts);

struct LinkJudgement {
  // The typical link, MB/s: the median over the hosts of each host's best figure (a host's link carries
  // at least its best). Not the median of the pairs: a slow host is in two of the ring's pairs, so with
  // three hosts the pairs' median would be its own figure. 0 without figures.
  double reference = 0;
  std::vector<std::size_t> degraded;  // indexes into the figures: measured, below reference / 4
  std::vector<std::size_t> named;     // hosts every measured pair of which is degraded
  std::vector<std::size_t> failed;    // indexes into the figures: no figure
};
inline constexpr double kDegradedFraction = 0.25;

LinkJudgement judge_links(const std::vector<LinkFigure>& figures, std::size_t hosts);

// The warnings, one line each (hvrun prints them before the first rank starts): each named host with its
// figures and what to check; each degraded pair neither of whose hosts is named; each pair without a
// figure with its reason. Empty when the links are alike. `hosts` indexes as the figures do.
std::vector<std::string> link_warnings(const std::vector<LinkFigure>& figures, const std::vector<LinkHost>& hosts);

// A rate as the reports write it: "4.8 MB/s", "912 MB/s".
std::string rate_text(double mb_per_s);

}  // namespace hvrun

#include "launcher/check/check_summary.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "common/duration_text.hpp"
#include "common/invariant.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/base/text_layout.hpp"
#include "launcher/nic/verdict_groups.hpp"

namespace hvrun {

namespace {

// Beyond this many hosts, ready hosts are packed several to a line.
constexpr std::size_t kOneLinePerHostUpTo = 64;
// Up to this many hosts the summary shows the link test's every pair; beyond, the range and the warnings
// (--verbose and --json show every pair).
constexpr std::size_t kLinkPairLinesUpTo = 8;
// At most this many not-ready hosts are named one per line at the top; the rest are counted.
constexpr std::size_t kNotReadyLines = 8;

std::size_t ok_count(const NicVerdict& v) {
  return static_cast<std::size_t>(
      std::count_if(v.peers.begin(), v.peers.end(), [](const PeerView& p) { return p.outcome == ProbeOutcome::kOk; }));
}

bool ready(const HostCheck& h) { return !h.ssh_error && h.selection.selected.has_value(); }

// Whether `address` is held by every host that reported its NICs.
bool on_every_host(const CheckInput& in, const std::string& address) {
  return std::all_of(in.hosts.begin(), in.hosts.end(), [&](const HostCheck& h) {
    return h.ssh_error || std::any_of(h.interfaces.begin(), h.interfaces.end(), [&](const InterfaceInfo& n) {
             return std::find(n.addresses.begin(), n.addresses.end(), address) != n.addresses.end();
           });
  });
}

// "timeout from all: no answer within 1 s: ..." — the grouped outcomes, with the meaning when every
// peer that failed failed the same way.
std::string verdict_words(const CheckInput& in, const NicVerdict& v) {
  std::string out = grouped_outcomes(v);
  std::set<ProbeOutcome> failures;
  std::chrono::milliseconds longest{0};
  for (const PeerView& p : v.peers) {
    if (p.outcome && *p.outcome != ProbeOutcome::kOk) failures.insert(*p.outcome);
    longest = std::max(longest, p.elapsed);
  }
  if (failures.size() != 1) return out;
  const ProbeOutcome o = *failures.begin();
  if (o == ProbeOutcome::kTimeout && longest.count() > 0) {
    const std::chrono::milliseconds rounded((longest.count() + 50) / 100 * 100);
    return out + ": no answer within " + seconds_text(rounded) + ", packets dropped on the way (a firewall?)";
  }
  return out + ": " + outcome_meaning(o, v.address, on_every_host(in, v.address));
}

struct Trap {
  std::string iface;
  std::string words;                // verdict_words, or the skip reason
  std::vector<std::string> hosts;   // names, in host order
  std::set<std::string> addresses;  // the NIC's address on each of them
  std::set<ProbeOutcome> outcomes;  // reached by none: every outcome its peers got, on every host
};

// A NIC that no peer reached: the outcomes split by timing (a failed neighbour lookup is a timeout
// for the first probers and "unreachable" for the later ones), so such NICs group by name alone.
bool reached_by_none(const NicVerdict& v) {
  return !v.peers.empty() && std::all_of(v.peers.begin(), v.peers.end(), [](const PeerView& p) {
    return p.outcome && *p.outcome != ProbeOutcome::kOk;
  });
}

std::string trap_words(const CheckInput& in, const Trap& t, const NicVerdict& any) {
  if (t.outcomes.size() <= 1) return verdict_words(in, any);
  std::vector<std::string> words;
  for (const ProbeOutcome o : t.outcomes) words.push_back(to_string(o));
  return join_words(words, " or ") + " from all: no host reached it";
}

// The unusable candidates and the skipped NICs of the reporting hosts, grouped by NIC name and what
// happened to it: a trap shared by every host is one entry naming them all.
void collect_traps(const CheckInput& in, std::vector<Trap>& probed, std::vector<Trap>& skipped) {
  std::map<std::pair<std::string, std::string>, std::size_t> seen_probed, seen_skipped;
  for (const HostCheck& h : in.hosts) {
    if (h.ssh_error) continue;
    const NicVerdict* shown = ready(h) ? nullptr : shown_nic(h);  // told in the not-ready lines
    for (const NicVerdict& v : h.selection.nics) {
      if (v.usable || &v == shown) continue;
      const bool none = reached_by_none(v);
      const auto [it, added] = seen_probed.try_emplace({v.iface, none ? "\n" : verdict_words(in, v)}, probed.size());
      if (added) probed.push_back({v.iface, {}, {}, {}, {}});
      Trap& t = probed[it->second];
      t.hosts.push_back(h.host);
      t.addresses.insert(v.address);
      if (none) {
        for (const PeerView& p : v.peers) {
          HVRUN_INVARIANT(p.outcome.has_value());  // reached_by_none: every peer probed it
          t.outcomes.insert(*p.outcome);
        }
      }
      t.words = none ? trap_words(in, t, v) : verdict_words(in, v);
    }
    for (const SkippedNic& s : h.selection.skipped) {
      // By the reason's data, not its words: `why` may carry one NIC's details ("enslaved to docker0").
      const std::string words = s.reason == SkipReason::kNotOffered ? s.why : skip_reason_text(s.reason);
      const auto [it, added] = seen_skipped.try_emplace({s.iface, words}, skipped.size());
      if (added) skipped.push_back({s.iface, words, {}, {}, {}});
      skipped[it->second].hosts.push_back(h.host);
    }
  }
}

// `listed` when it is short; else the first few of `items` and how many more (a Docker host's
// hundreds of container veths are one reason, not hundreds of names).
std::string capped(const std::vector<std::string>& items, const std::string& listed) {
  constexpr std::size_t kNamed = 4;
  if (listed.size() <= 160 || items.size() <= kNamed) return listed;
  const std::vector<std::string> first(items.begin(), items.begin() + kNamed);
  return join_words(first) + " and " + std::to_string(items.size() - kNamed) + " more";
}

std::string host_settings_lines(const ToolSettings& s, std::size_t width) {
  std::string out = "settings that work for other tools:\n";
  out += wrap_line("  hvrun " + s.network_interface, width);
  std::vector<std::string> values;  // distinct, first-seen order
  std::map<std::string, std::vector<std::string>> hosts_of;
  for (const auto& [host, value] : s.nccl) {
    if (!hosts_of.count(value)) values.push_back(value);
    hosts_of[value].push_back(host);
  }
  if (values.size() == 1) {
    out += wrap_line("  NCCL_SOCKET_IFNAME=" + values.front() + " (every host)", width);
  } else {
    std::vector<std::string> parts;
    for (const auto& v : values) parts.push_back("NCCL_SOCKET_IFNAME=" + v + " on " + fold_names(hosts_of[v]));
    out += wrap_line("  " + join_words(parts, "; "), width);
  }
  if (s.shared_subnet) {
    const std::string cidr = s.shared_subnet->text();
    out +=
        wrap_line("  Open MPI: mpirun --mca btl_tcp_if_include " + cidr + " --mca oob_tcp_if_include " + cidr, width);
  } else {
    out += wrap_line("  Open MPI: the chosen NICs share no IPv4 subnet; give btl_tcp_if_include per host", width);
  }
  return out;
}

// One line per host ("  name  iface  address"); beyond kOneLinePerHostUpTo, one line per chosen NIC
// name with the hosts that chose it ("  eth1 on node[0-499]"), wrapped: at that size the names say
// more than 500 addresses would.
std::string host_lines(const CheckInput& in, std::size_t width) {
  if (in.hosts.size() > kOneLinePerHostUpTo) {
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::string>> by_nic;
    for (const HostCheck& h : in.hosts) {
      if (!ready(h)) continue;  // the not-ready hosts are listed at the top
      const std::string& nic = h.selection.selected->iface;
      if (!by_nic.count(nic)) order.push_back(nic);
      by_nic[nic].push_back(h.host);
    }
    std::string out;
    for (const auto& nic : order)
      out += wrap_line("  " + nic + " on " + std::to_string(by_nic[nic].size()) + " hosts: " + fold_names(by_nic[nic]),
                       width, 6);
    return out;
  }
  std::size_t name_w = 0, iface_w = 0;
  for (const HostCheck& h : in.hosts) {
    name_w = std::max(name_w, h.host.size());
    if (ready(h)) iface_w = std::max(iface_w, h.selection.selected->iface.size());
  }
  std::string out;
  for (const HostCheck& h : in.hosts) {
    std::string line = "  " + pad_right(h.host, name_w) + "  ";
    if (ready(h)) {
      line += pad_right(h.selection.selected->iface, iface_w) + " " + h.selection.selected->address;
    } else {
      line += std::string("none: ") + (h.ssh_error ? "ssh failed" : "no usable NIC");
    }
    out += wrap_line(line, width);
  }
  return out;
}

}  // namespace

const NicVerdict* shown_nic(const HostCheck& h) {
  if (h.selection.selected) {
    for (const NicVerdict& v : h.selection.nics)
      if (v.iface == h.selection.selected->iface) return &v;
  }
  const NicVerdict* best = nullptr;
  for (const NicVerdict& v : h.selection.nics)
    if (best == nullptr || ok_count(v) > ok_count(*best)) best = &v;
  return best;
}

std::vector<const PeerView*> views_by_host(const CheckInput& in, const NicVerdict& verdict) {
  std::map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < in.hosts.size(); ++i) index.emplace(in.hosts[i].host, i);
  std::vector<const PeerView*> out(in.hosts.size(), nullptr);
  for (const PeerView& p : verdict.peers) {
    const auto it = index.find(p.peer_host);
    if (it != index.end()) out[it->second] = &p;
  }
  return out;
}

std::vector<OneWayPair> one_way_pairs(const CheckInput& in) {
  const std::size_t n = in.hosts.size();
  // views[to][from]: what `from` got probing `to`'s shown NIC.
  std::vector<std::vector<const PeerView*>> views(n);
  for (std::size_t to = 0; to < n; ++to) {
    const NicVerdict* shown = in.hosts[to].ssh_error ? nullptr : shown_nic(in.hosts[to]);
    if (shown != nullptr) views[to] = views_by_host(in, *shown);
  }
  const auto outcome = [&](std::size_t from, std::size_t to) -> std::optional<ProbeOutcome> {
    if (views[to].empty() || views[to][from] == nullptr) return std::nullopt;
    return views[to][from]->outcome;
  };
  std::vector<OneWayPair> out;
  for (std::size_t from = 0; from < n; ++from) {
    for (std::size_t to = 0; to < n; ++to) {
      if (from == to || views[from].empty()) continue;
      const auto there = outcome(from, to);
      if (there && *there != ProbeOutcome::kOk && outcome(to, from) == ProbeOutcome::kOk)
        out.push_back({from, to, *there});
    }
  }
  return out;
}

std::vector<std::string> not_ready_lines(const CheckInput& in) {
  std::vector<std::string> out;
  for (const HostCheck& h : in.hosts) {
    if (ready(h)) continue;
    if (h.ssh_error) {
      out.push_back(h.host + ": ssh failed: " + *h.ssh_error);
      continue;
    }
    const NicVerdict* best = shown_nic(h);
    if (best == nullptr) {
      std::vector<std::string> why;
      for (const SkippedNic& s : h.selection.skipped) why.push_back(s.iface + ": " + s.why);
      out.push_back(h.host + ": no NIC to probe (" + (why.empty() ? "none with an IP address" : join_words(why, "; ")) +
                    ")");
      continue;
    }
    out.push_back(h.host + ": no usable NIC; best " + best->iface + " " + best->address + ": " +
                  verdict_words(in, *best));
  }
  return out;
}

std::string link_lines(const CheckInput& in, std::size_t width, bool every_pair) {
  if (in.links.empty()) return {};
  double slowest = -1, fastest = -1;
  for (const LinkFigure& f : in.links)
    if (f.measured()) {
      slowest = slowest < 0 ? f.mb_per_s() : std::min(slowest, f.mb_per_s());
      fastest = std::max(fastest, f.mb_per_s());
    }
  std::string head = "links, each host to the next (4 MiB or 250 ms each): " + std::to_string(in.links.size()) + " pairs";
  if (slowest >= 0) head += ", " + rate_text(slowest) + " to " + rate_text(fastest);
  std::string out = "\n" + wrap_line(head, width);
  const auto name = [&](std::size_t h) { return h < in.link_hosts.size() ? in.link_hosts[h].name : "?"; };
  if (every_pair) {
    std::size_t name_w = 0;
    for (const LinkFigure& f : in.links) name_w = std::max(name_w, name(f.from).size() + 4 + name(f.to).size());
    for (const LinkFigure& f : in.links)
      out += wrap_line("  " + pad_right(name(f.from) + " -> " + name(f.to), name_w) + "  " +
                           (f.measured() ? rate_text(f.mb_per_s()) : "no figure: " + f.error),
                       width, 6);
  }
  for (const std::string& line : link_warnings(in.links, in.link_hosts)) out += wrap_line("  " + line, width, 6);
  return out;
}

std::string check_summary(const CheckInput& in, const ToolSettings& settings, std::size_t width) {
  std::vector<std::string> not_ready;
  for (const HostCheck& h : in.hosts)
    if (!ready(h)) not_ready.push_back(h.host);
  std::string head = "hvrun --check-only: " + std::to_string(in.hosts.size()) +
                     (in.hosts.size() == 1 ? " host" : " hosts") + ", probes took " +
                     std::to_string(in.probe_time.count()) + " ms: ";
  if (not_ready.empty()) {
    head += in.hosts.empty() ? "no hosts" : "every host has a usable NIC";
  } else {
    head += std::to_string(not_ready.size()) + " not ready (" + fold_names(not_ready) + ")";
  }
  std::string out = wrap_line(head, width);

  // The causes first: they are what a person came for.
  const auto causes = not_ready_lines(in);
  for (std::size_t i = 0; i < causes.size() && i < kNotReadyLines; ++i) out += wrap_line("  " + causes[i], width, 6);
  if (causes.size() > kNotReadyLines)
    out += "  and " + std::to_string(causes.size() - kNotReadyLines) + " more (--verbose lists each)\n";
  std::vector<std::string> hints;
  for (const OneWayPair& p : one_way_pairs(in)) {
    hints.push_back("one-way: " + in.hosts[p.from].host + " -> " + in.hosts[p.to].host + " " + to_string(p.outcome) +
                    ", " + in.hosts[p.to].host + " -> " + in.hosts[p.from].host + " ok: check " + in.hosts[p.to].host +
                    "'s firewall for traffic from " + in.hosts[p.from].host);
  }
  if (hints.size() > kNotReadyLines) {
    const std::size_t more = hints.size() - kNotReadyLines;
    hints.resize(kNotReadyLines);
    hints.push_back("and " + std::to_string(more) + " more one-way pairs (--matrix shows them)");
  }
  for (const auto& hint : hints) out += wrap_line("  " + hint, width, 6);

  out += "\n" + host_lines(in, width);
  if (not_ready.empty() && !in.hosts.empty()) out += "\n" + host_settings_lines(settings, width);
  out += link_lines(in, width, in.link_hosts.size() <= kLinkPairLinesUpTo);

  std::vector<Trap> probed, skipped;
  collect_traps(in, probed, skipped);
  std::size_t reporting = 0;
  for (const HostCheck& h : in.hosts) reporting += h.ssh_error ? 0 : 1;
  const auto everywhere = [&](const Trap& t) { return t.hosts.size() == reporting && reporting > 1; };
  const auto nic_name = [](const Trap& t) {
    return t.iface + (t.addresses.size() == 1 ? " " + *t.addresses.begin() : "");
  };
  std::string shared, particular;
  for (const Trap& t : probed) {
    if (everywhere(t)) {
      shared += wrap_line("  " + nic_name(t) + ": " + t.words, width, 6);
    } else {
      particular += wrap_line("  " + nic_name(t) + " on " + fold_names(t.hosts) + ": " + t.words, width, 6);
    }
  }
  // Skipped NICs: one line per reason, the NICs that have it listed after it.
  std::vector<std::string> reasons;
  std::map<std::string, std::vector<std::string>> shared_skips, particular_skips;
  for (const Trap& t : skipped) {
    if (!shared_skips.count(t.words) && !particular_skips.count(t.words)) reasons.push_back(t.words);
    if (everywhere(t))
      shared_skips[t.words].push_back(t.iface);
    else
      particular_skips[t.words].push_back(t.iface + " on " + fold_names(t.hosts));
  }
  for (const auto& r : reasons) {
    if (shared_skips.count(r))
      shared +=
          wrap_line("  not considered: " + capped(shared_skips[r], fold_names(shared_skips[r])) + ": " + r, width, 6);
    if (particular_skips.count(r))
      particular += wrap_line(
          "  not considered: " + capped(particular_skips[r], join_words(particular_skips[r], "; ")) + ": " + r, width,
          6);
  }
  if (!shared.empty()) out += "\non every host, not used:\n" + shared;
  if (!particular.empty()) out += "\nalso not used:\n" + particular;
  if (!not_ready.empty()) out += "\n--verbose lists every NIC of every host; --matrix draws who reaches whom\n";
  return out;
}

}  // namespace hvrun

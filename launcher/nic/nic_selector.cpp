#include "launcher/nic/nic_selector.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "launcher/base/text_layout.hpp"

namespace hvrun {

namespace {

std::string_view strip_scope(std::string_view address) { return address.substr(0, address.find('%')); }

// The addresses `nic` offers, or why it offers none.
struct Candidacy {
  std::vector<std::string> addresses;
  std::optional<SkipReason> why_not;
};

Candidacy candidacy(const InterfaceInfo& nic, const NicFilter& filter, bool single_host) {
  if (!filter.allows(nic)) {
    const bool named = !filter.has_inclusions() || filter.order(nic).has_value();
    return {{}, named ? SkipReason::kExcluded : SkipReason::kNotNamed};
  }
  if (nic.loopback && !single_host) return {{}, SkipReason::kLoopback};
  if (!nic.up) return {{}, SkipReason::kDown};
  if (!nic.running) return {{}, SkipReason::kNoCarrier};
  // A bridge port (docker0's container veths) carries no address of its own: the bridge does.
  if (!nic.master.empty()) return {{}, SkipReason::kBridgePort};
  std::vector<std::string> v4, v6;
  bool link_local = false;
  for (const auto& a : nic.addresses) {
    if (!filter.admits_address(nic, a)) continue;
    if (is_ipv4_address(a)) {
      v4.push_back(a);
    } else if (is_ipv6_link_local(a)) {
      link_local = true;
    } else if (is_ip_address(a)) {
      v6.push_back(a);
    }
  }
  // One of each family first, so that a cap still tries both.
  std::vector<std::string> ordered;
  if (!v4.empty()) ordered.push_back(v4.front());
  if (!v6.empty()) ordered.push_back(v6.front());
  for (std::size_t i = 1; i < v4.size(); ++i) ordered.push_back(v4[i]);
  for (std::size_t i = 1; i < v6.size(); ++i) ordered.push_back(v6[i]);
  if (ordered.size() > kMaxAddressesPerNic) ordered.resize(kMaxAddressesPerNic);
  if (ordered.empty()) return {{}, link_local ? SkipReason::kLinkLocalOnly : SkipReason::kNoAddressInSubnet};
  return {ordered, std::nullopt};
}

std::string nic_list(const std::vector<InterfaceInfo>& nics) {
  std::vector<std::string> names;
  for (const auto& n : nics) names.push_back(n.name);
  return names.empty() ? "no NIC with an IP address" : join_words(names);
}

// How informative an outcome is when a peer got several over a NIC's addresses: `ok` wins; then the
// outcomes that name a cause (an answer from the wrong host says the most), silence and no-route last.
int rank_of(ProbeOutcome o) {
  switch (o) {
    case ProbeOutcome::kOk: return 0;
    case ProbeOutcome::kWrongHost: return 1;
    case ProbeOutcome::kAuthFailed: return 2;
    case ProbeOutcome::kRefused: return 3;
    case ProbeOutcome::kTimeout: return 4;
    case ProbeOutcome::kUnreachable: return 5;
  }
  return 6;
}

// Index of the host that calls itself `identity` (its -H name or hostname), or nullopt.
std::optional<std::size_t> host_named(const std::vector<HostInventory>& hosts, const std::string& identity) {
  if (identity.empty()) return std::nullopt;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].host == identity || hosts[i].hostname == identity) return i;
  return std::nullopt;
}

std::vector<std::size_t> holders_of(const std::vector<HostInventory>& hosts, std::string_view address) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const bool has = std::any_of(hosts[i].interfaces.begin(), hosts[i].interfaces.end(), [&](const InterfaceInfo& n) {
      return std::any_of(n.addresses.begin(), n.addresses.end(),
                         [&](const std::string& a) { return strip_scope(a) == strip_scope(address); });
    });
    if (has) out.push_back(i);
  }
  return out;
}

std::string peer_names(const std::vector<const PeerView*>& views) {
  std::vector<std::string> names;
  for (const PeerView* v : views) names.push_back(v->peer_host);
  return join_words(names);
}

// " (at fd77::a)" when the peers' outcome came from other addresses than the NIC's headline one.
std::string at_other_address(const std::vector<const PeerView*>& views, const std::string& headline) {
  std::vector<std::string> others;
  for (const PeerView* v : views)
    if (v->address != headline && std::find(others.begin(), others.end(), v->address) == others.end())
      others.push_back(v->address);
  return others.empty() ? "" : " (at " + join_words(others) + ")";
}

// Why peers got kWrongHost: the address also exists elsewhere, usually on the prober itself.
std::string wrong_host_clause(const std::vector<HostInventory>& hosts, const std::vector<const PeerView*>& views,
                              const std::string& headline) {
  std::vector<const PeerView*> themselves;
  std::vector<std::string> clauses;
  for (const PeerView* v : views) {
    const auto answerer = host_named(hosts, v->answered_as);
    if (answerer == v->peer) {
      themselves.push_back(v);
    } else if (answerer) {
      clauses.push_back("answered as " + hosts[*answerer].host + " from " + v->peer_host + ": " +
                        hosts[*answerer].host + " holds this address too");
    } else {
      const std::string who = v->answered_as.empty() ? "another machine" : "'" + v->answered_as + "'";
      clauses.push_back("answered as " + who + " from " + v->peer_host +
                        ": a machine outside this job holds this address");
    }
  }
  if (!themselves.empty()) {
    const auto holders = holders_of(hosts, headline);
    std::string where;
    if (holders.size() == hosts.size()) {
      where = "this address exists on every host";
    } else {
      std::vector<std::string> names;
      for (std::size_t h : holders) names.push_back(hosts[h].host);
      where = names.empty() ? "the probers hold this address" : "this address exists on " + join_words(names);
    }
    clauses.insert(clauses.begin(), "answered as the prober itself (from " + peer_names(themselves) + ")" +
                                        at_other_address(themselves, headline) + ": " + where);
  }
  return join_words(clauses, "; ");
}

std::chrono::milliseconds longest_wait(const std::vector<const PeerView*>& views) {
  std::chrono::milliseconds longest{0};
  for (const PeerView* v : views) longest = std::max(longest, v->elapsed);
  // Round to a tenth of a second: the deadline, not the scheduler's jitter ("1 s", not "1.003 s").
  return std::chrono::milliseconds((longest.count() + 50) / 100 * 100);
}

// The reason an unusable NIC gives, from the peers' views: what each group of failing peers saw, after
// the peers that did reach it. When no peer failed, every one reached some address but none all.
std::string reason_for(const std::vector<HostInventory>& hosts, const NicVerdict& v) {
  std::vector<const PeerView*> reached;
  std::array<std::vector<const PeerView*>, 6> failed;  // by rank_of(); [0] stays empty
  std::vector<const PeerView*> not_probed;
  for (const PeerView& p : v.peers) {
    if (!p.outcome) {
      not_probed.push_back(&p);
    } else if (*p.outcome == ProbeOutcome::kOk) {
      reached.push_back(&p);
    } else {
      failed[static_cast<std::size_t>(rank_of(*p.outcome))].push_back(&p);
    }
  }
  std::vector<std::string> clauses;
  const auto add = [&](ProbeOutcome o, const std::string& before, const std::string& after) {
    const auto& views = failed[static_cast<std::size_t>(rank_of(o))];
    if (!views.empty()) clauses.push_back(before + peer_names(views) + at_other_address(views, v.address) + after);
  };
  const auto& wrong = failed[static_cast<std::size_t>(rank_of(ProbeOutcome::kWrongHost))];
  if (!wrong.empty()) clauses.push_back(wrong_host_clause(hosts, wrong, v.address));
  add(ProbeOutcome::kAuthFailed, "answered without a valid HMAC from ",
      " (another job, or another program on that port)");
  add(ProbeOutcome::kRefused, "refused from ", " (a firewall rejects it?)");
  const auto& timeouts = failed[static_cast<std::size_t>(rank_of(ProbeOutcome::kTimeout))];
  const auto wait = longest_wait(timeouts);
  add(ProbeOutcome::kTimeout,
      wait.count() > 0 ? "no answer within " + seconds_text(wait) + " from " : std::string("no answer from "),
      ": packets dropped?");
  add(ProbeOutcome::kUnreachable, "no route from ", "");
  if (!not_probed.empty()) clauses.push_back("not probed from " + peer_names(not_probed));

  if (clauses.empty()) {
    // Every peer reached some address, but no one address was reached by all of them.
    std::vector<std::string> seen;
    for (const PeerView* p : reached) seen.push_back(p->peer_host + " only " + p->address);
    return "no address of it was reached from every host (" + join_words(seen, "; ") + ")";
  }
  const std::string why = join_words(clauses, "; ");
  return reached.empty() ? why : "reached from " + peer_names(reached) + " but " + why;
}

// `about` holds the results of probes of this NIC of `host` (any order, other NICs' left out): one
// pass over them, so a selection costs the number of results, not that times hosts squared.
NicVerdict judge(const std::vector<HostInventory>& hosts, std::size_t host, const std::string& iface,
                 const std::vector<std::string>& addresses, const std::vector<const ProbeResult*>& about,
                 const std::vector<std::size_t>* probers, bool single_host) {
  NicVerdict v;
  v.iface = iface;
  v.addresses = addresses;
  v.address = addresses.front();
  if (single_host) {
    v.usable = true;  // nobody else needs to reach it
    return v;
  }
  // The peers that judge it: its probers (a few, ascending) or every other host. Looking a prober up
  // is a search of those few, so a bounded set costs its size per NIC, not the number of hosts.
  std::vector<std::size_t> view_of;  // all pairs: peer -> index into v.peers
  const auto add_peer = [&](std::size_t peer) {
    PeerView view;
    view.peer = peer;
    view.peer_host = hosts[peer].host;
    v.peers.push_back(std::move(view));
  };
  if (probers != nullptr) {
    for (std::size_t peer : *probers)
      if (peer < hosts.size() && peer != host) add_peer(peer);
  } else {
    view_of.assign(hosts.size(), hosts.size());
    for (std::size_t peer = 0; peer < hosts.size(); ++peer) {
      if (peer == host) continue;
      view_of[peer] = v.peers.size();
      add_peer(peer);
    }
  }
  const auto view_index = [&](std::size_t from) -> std::size_t {  // v.peers.size(): not one of its peers
    if (from >= hosts.size()) return v.peers.size();
    if (probers == nullptr) return view_of[from] == hosts.size() ? v.peers.size() : view_of[from];
    const auto it = std::find_if(v.peers.begin(), v.peers.end(), [&](const PeerView& p) { return p.peer == from; });
    return static_cast<std::size_t>(it - v.peers.begin());
  };
  std::vector<std::set<std::size_t>> ok_from(addresses.size());  // per address, the peers that reached it
  for (const ProbeResult* r : about) {
    const std::size_t vi = view_index(r->from);
    if (vi == v.peers.size()) continue;
    const auto at = std::find(addresses.begin(), addresses.end(), r->address);
    if (at == addresses.end()) continue;
    if (r->outcome == ProbeOutcome::kOk) ok_from[static_cast<std::size_t>(at - addresses.begin())].insert(r->from);
    PeerView& view = v.peers[vi];
    if (!view.outcome || rank_of(r->outcome) < rank_of(*view.outcome)) {
      view.outcome = r->outcome;
      view.address = r->address;
      view.answered_as = r->answered_as;
      view.elapsed = r->elapsed;
      view.detail = r->detail;
    }
  }
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    if (ok_from[i].size() == v.peers.size()) {
      v.usable = true;
      v.address = addresses[i];
      return v;
    }
  }
  v.reason = reason_for(hosts, v);
  return v;
}

// Smaller is better; see select_nics in the header.
using Rank = std::tuple<std::size_t, int, int, int, std::size_t>;

Rank rank_nic(const InterfaceInfo& nic, std::size_t kernel_index, const NicFilter& filter, bool single_host) {
  const std::size_t order = filter.order(nic).value_or(std::numeric_limits<std::size_t>::max());
  const int loop = nic.loopback == single_host ? 0 : 1;
  const int virt = has_virtual_name(nic.name) ? 2 : (nic.is_virtual ? 1 : 0);
  return {order, loop, virt, -std::max(nic.speed_mbps, 0), kernel_index};
}

// Why `best` won over `next` (the runner-up), from the first ranking key where they differ.
std::string why_chosen(const InterfaceInfo& best, const Rank& b, const InterfaceInfo* next, const Rank& n,
                       bool single_host) {
  if (next == nullptr) return "the only usable NIC";
  if (std::get<0>(b) != std::get<0>(n)) return "earlier in --network-interface than " + next->name;
  if (std::get<1>(b) != std::get<1>(n))
    return single_host ? "loopback, all ranks on one host" : next->name + " is loopback";
  if (std::get<2>(b) != std::get<2>(n)) {
    if (std::get<2>(n) == 2) return next->name + " is container or VM plumbing by its name";
    return "physical; " + next->name + " is virtual";
  }
  if (std::get<3>(b) != std::get<3>(n)) {
    const std::string theirs = next->speed_mbps > 0 ? std::to_string(next->speed_mbps) + " Mb/s" : "unknown";
    return "faster than " + next->name + " (" + std::to_string(best.speed_mbps) + " Mb/s vs " + theirs + ")";
  }
  return "before " + next->name + " in the kernel's order, otherwise equal";
}

}  // namespace

const char* to_string(SkipReason reason) {
  switch (reason) {
    case SkipReason::kNotOffered: return "not-offered";
    case SkipReason::kExcluded: return "excluded";
    case SkipReason::kNotNamed: return "not-named";
    case SkipReason::kLoopback: return "loopback";
    case SkipReason::kDown: return "down";
    case SkipReason::kNoCarrier: return "no-carrier";
    case SkipReason::kLinkLocalOnly: return "link-local-only";
    case SkipReason::kBridgePort: return "bridge-port";
    case SkipReason::kNoAddressInSubnet: return "no-address-in-subnet";
  }
  return "?";
}

const char* skip_reason_text(SkipReason reason) {
  switch (reason) {
    case SkipReason::kNotOffered: return "not offered for probing";
    case SkipReason::kExcluded: return "excluded by --network-interface";
    case SkipReason::kNotNamed: return "not named by --network-interface";
    case SkipReason::kLoopback: return "loopback: reaches only its own host";
    case SkipReason::kDown: return "down";
    case SkipReason::kNoCarrier: return "no carrier (up but not running)";
    case SkipReason::kLinkLocalOnly: return "link-local addresses only: scoped to one link, not routable between hosts";
    case SkipReason::kBridgePort: return "a port of a bridge: the bridge carries its traffic";
    case SkipReason::kNoAddressInSubnet: return "no address inside the subnets of --network-interface";
  }
  return "?";
}

bool has_virtual_name(const std::string& iface) {
  static constexpr std::array<std::string_view, 11> kPrefixes{
      "docker", "veth", "virbr", "br-", "vnet", "cni", "flannel", "cali", "lxcbr", "lxdbr", "podman"};
  return std::any_of(kPrefixes.begin(), kPrefixes.end(), [&](std::string_view p) { return iface.starts_with(p); });
}

std::vector<ProbeTarget> probe_targets(const std::vector<HostInventory>& hosts, const NicFilter& filter,
                                       bool single_host) {
  for (const HostInventory& h : hosts) {
    if (filter.selects_any(h.interfaces)) continue;
    std::vector<std::string> quoted;
    for (const auto& v : filter.inclusions()) quoted.push_back("'" + v + "'");
    std::vector<std::string> also;
    for (const HostInventory& o : hosts)
      if (&o != &h && !filter.selects_any(o.interfaces)) also.push_back(o.host);
    throw UsageError("--network-interface: host " + h.host + " has no NIC matching " + join_words(quoted, " or ") +
                     " (it has: " + nic_list(h.interfaces) + ")" +
                     (also.empty() ? "" : "; " + join_words(also) + (also.size() == 1 ? " has" : " have") + " none either") +
                     "; list a NIC of every host (names may differ per host: eth1,enp6s0) or leave the option out");
  }
  std::vector<ProbeTarget> out;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    for (const InterfaceInfo& nic : hosts[i].interfaces) {
      for (auto& a : candidacy(nic, filter, single_host).addresses) out.push_back({i, nic.name, std::move(a)});
    }
  }
  return out;
}

std::vector<std::size_t> probe_order(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                     const NicFilter& filter, bool single_host) {
  // Per target: (its NIC's place in its host's preference, its place among that NIC's addresses, host).
  std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> key(targets.size());
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const auto& nics = hosts[h].interfaces;
    std::vector<std::pair<Rank, std::string_view>> ranked;  // by preference
    for (std::size_t k = 0; k < nics.size(); ++k) ranked.emplace_back(rank_nic(nics[k], k, filter, single_host), nics[k].name);
    std::sort(ranked.begin(), ranked.end());
    std::map<std::string_view, std::size_t> seen;  // addresses of each NIC so far
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].host != h) continue;
      const auto place = std::find_if(ranked.begin(), ranked.end(), [&](const auto& r) { return r.second == targets[t].iface; });
      key[t] = {static_cast<std::size_t>(place - ranked.begin()), seen[targets[t].iface]++, h};
    }
  }
  std::vector<std::size_t> order(targets.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = t;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
  return order;
}

std::vector<HostSelection> select_nics(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                       const std::vector<ProbeResult>& results, const NicFilter& filter,
                                       bool single_host, const std::vector<std::vector<std::size_t>>& probers) {
  std::vector<HostSelection> out(hosts.size());
  std::map<std::pair<std::size_t, std::string_view>, std::vector<const ProbeResult*>> about;  // (to, iface)
  for (const ProbeResult& r : results) about[{r.to, r.iface}].push_back(&r);
  // A NIC's targets by (host, iface), in targets' order: one pass, so hosts with hundreds of NICs that
  // offer nothing (container veths) cost their number, not that times the targets.
  std::map<std::pair<std::size_t, std::string_view>, std::vector<std::string>> offered;
  for (const ProbeTarget& t : targets) offered[{t.host, t.iface}].push_back(t.address);
  const std::vector<const ProbeResult*> none;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    HostSelection& sel = out[h];
    const auto& nics = hosts[h].interfaces;
    std::vector<std::pair<const InterfaceInfo*, std::size_t>> usable;  // NIC, kernel index
    for (std::size_t k = 0; k < nics.size(); ++k) {
      const InterfaceInfo& nic = nics[k];
      const auto it = offered.find({h, nic.name});
      if (it == offered.end()) {
        const SkipReason why = candidacy(nic, filter, single_host).why_not.value_or(SkipReason::kNotOffered);
        sel.skipped.push_back(
            {nic.name, nic.addresses.empty() ? "" : nic.addresses.front(), skip_reason_text(why), why});
        continue;
      }
      const auto found = about.find({h, nic.name});
      sel.nics.push_back(
          judge(hosts, h, nic.name, it->second, found != about.end() ? found->second : none,
                h < probers.size() ? &probers[h] : nullptr, single_host));
      if (sel.nics.back().usable) usable.emplace_back(&nic, k);
    }
    if (usable.empty()) continue;
    std::vector<Rank> ranks;
    for (const auto& [nic, k] : usable) ranks.push_back(rank_nic(*nic, k, filter, single_host));
    std::vector<std::size_t> by_rank(usable.size());
    for (std::size_t i = 0; i < by_rank.size(); ++i) by_rank[i] = i;
    std::sort(by_rank.begin(), by_rank.end(), [&](std::size_t a, std::size_t b) { return ranks[a] < ranks[b]; });
    const std::size_t best = by_rank[0];
    const InterfaceInfo* next = by_rank.size() > 1 ? usable[by_rank[1]].first : nullptr;
    const auto verdict = std::find_if(sel.nics.begin(), sel.nics.end(),
                                      [&](const NicVerdict& v) { return v.iface == usable[best].first->name; });
    sel.selected = NicChoice{verdict->iface, verdict->address,
                             why_chosen(*usable[best].first, ranks[best], next,
                                        next != nullptr ? ranks[by_rank[1]] : Rank{}, single_host)};
  }
  return out;
}

std::string nic_summary(const std::string& host, const NicVerdict& verdict) {
  std::string line = verdict.iface + " " + verdict.address + " on " + host;
  return verdict.usable ? line + ": usable" : line + ": " + verdict.reason;
}

std::optional<IpSubnet> shared_ipv4_subnet(const std::vector<HostInventory>& hosts,
                                           const std::vector<HostSelection>& selections) {
  if (hosts.empty() || hosts.size() != selections.size()) return std::nullopt;
  std::optional<IpSubnet> shared;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const auto& chosen = selections[h].selected;
    if (!chosen || !is_ipv4_address(chosen->address)) return std::nullopt;
    std::optional<IpSubnet> subnet;
    for (const InterfaceInfo& nic : hosts[h].interfaces) {
      if (nic.name != chosen->iface) continue;
      for (std::size_t i = 0; i < nic.addresses.size() && i < nic.prefix_lengths.size(); ++i)
        if (nic.addresses[i] == chosen->address) subnet = IpSubnet::of(nic.addresses[i], nic.prefix_lengths[i]);
    }
    if (!subnet || (shared && *shared != *subnet)) return std::nullopt;
    shared = subnet;
  }
  return shared;
}

}  // namespace hvrun

#include "launcher/check/check_report.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "launcher/base/text_layout.hpp"
#include "launcher/check/check_html.hpp"
#include "launcher/check/check_matrix.hpp"
#include "launcher/check/check_summary.hpp"
#include "launcher/nic/verdict_groups.hpp"

namespace hvrun {

namespace {

const NicVerdict* verdict_of(const HostSelection& sel, const std::string& iface) {
  for (const auto& v : sel.nics)
    if (v.iface == iface) return &v;
  return nullptr;
}

const SkippedNic* skipped_of(const HostSelection& sel, const std::string& iface) {
  for (const auto& s : sel.skipped)
    if (s.iface == iface) return &s;
  return nullptr;
}

bool is_selected(const HostSelection& sel, const std::string& iface) {
  return sel.selected && sel.selected->iface == iface;
}

// "b ok, c refused (Connection refused), d not-probed": each peer's outcome, with the prober's words on
// a failure when it gave some.
std::string peer_words(const NicVerdict& v) {
  std::vector<std::string> words;
  for (const auto& p : v.peers) {
    std::string w = p.peer_host + " " + (p.outcome ? to_string(*p.outcome) : "not-probed");
    if (!p.detail.empty()) w += " (" + p.detail + ")";
    words.push_back(std::move(w));
  }
  return join_words(words);
}

// The NICs that would be candidates on a host (up, running, loopback only on a single host), for
// telling whether a suggested filter picks out exactly the chosen one.
bool selects_exactly(const NicFilter& f, const HostCheck& h, bool single_host) {
  for (const auto& nic : h.interfaces) {
    if (!nic.up || !nic.running || (nic.loopback && !single_host)) continue;
    if (f.allows(nic) != (nic.name == h.selection.selected->iface)) return false;
  }
  return true;
}

bool filter_left_out(const SkippedNic& s) {
  return s.reason == SkipReason::kExcluded || s.reason == SkipReason::kNotNamed ||
         s.reason == SkipReason::kNoAddressInSubnet;
}

}  // namespace

CheckReport::CheckReport(CheckInput input) : in_(std::move(input)) {}

bool CheckReport::all_usable() const {
  return !in_.hosts.empty() && std::all_of(in_.hosts.begin(), in_.hosts.end(), [](const HostCheck& h) {
    return !h.ssh_error && h.selection.selected.has_value();
  });
}

ToolSettings CheckReport::settings() const {
  ToolSettings out;
  if (!all_usable()) return out;
  std::vector<std::string> names;
  std::vector<HostInventory> inventories;
  std::vector<HostSelection> selections;
  for (const HostCheck& h : in_.hosts) {
    const std::string exact = "=" + h.selection.selected->iface;
    if (std::find(names.begin(), names.end(), exact) == names.end()) names.push_back(exact);
    out.nccl.emplace_back(h.host, exact);
    inventories.push_back({h.host, "", h.interfaces});
    selections.push_back(h.selection);
  }
  out.shared_subnet = shared_ipv4_subnet(inventories, selections);
  const auto exact_everywhere = [&](const NicFilter& f) {
    return std::all_of(in_.hosts.begin(), in_.hosts.end(),
                       [&](const HostCheck& h) { return selects_exactly(f, h, in_.single_host); });
  };
  const NicFilter by_name = NicFilter::parse({join_words(names, ",")});
  if (!exact_everywhere(by_name) && out.shared_subnet) {
    const NicFilter by_subnet = NicFilter::parse({out.shared_subnet->text()});
    if (exact_everywhere(by_subnet)) {
      out.network_interface = by_subnet.text();
      return out;
    }
  }
  out.network_interface = by_name.text();
  return out;
}

std::string CheckReport::listing() const {
  std::string out = "hvrun --check-only: " + std::to_string(in_.hosts.size()) +
                    (in_.hosts.size() == 1 ? " host" : " hosts") + ", probes took " +
                    std::to_string(in_.probe_time.count()) + " ms\n";
  for (const HostCheck& h : in_.hosts) {
    out += "\n" + h.host + ": ";
    if (h.ssh_error) {
      out += "ssh failed: " + *h.ssh_error + "\n";
      continue;
    }
    out += "ssh ok, agent " + (h.agent_version.empty() ? std::string("of unknown version") : h.agent_version) + "\n";
    std::size_t name_w = 0, addr_w = 0;
    for (const auto& v : h.selection.nics) {
      name_w = std::max(name_w, v.iface.size());
      addr_w = std::max(addr_w, v.address.size());
    }
    for (const auto& v : h.selection.nics) {
      std::string line = "  " + pad_right(v.iface, name_w) + "  " + pad_right(v.address, addr_w);
      const std::string words = peer_words(v);
      if (!words.empty()) line += "  " + words;
      line += v.usable ? (is_selected(h.selection, v.iface) ? "  -> selected" : "  usable") : "  UNUSABLE";
      out += line + "\n";
      if (!v.usable) out += "  " + std::string(name_w + 2, ' ') + v.reason + "\n";
    }
    if (!h.selection.skipped.empty()) {
      std::vector<std::string> items;
      for (const auto& s : h.selection.skipped) items.push_back(s.iface + " (" + s.why + ")");
      out += "  not considered: " + join_words(items) + "\n";
    }
  }

  out += "\nNIC per host:\n";
  std::size_t host_w = 0;
  for (const HostCheck& h : in_.hosts) host_w = std::max(host_w, h.host.size());
  for (const HostCheck& h : in_.hosts) {
    out += "  " + pad_right(h.host, host_w) + "  ";
    if (h.ssh_error) {
      out += "none: ssh failed\n";
    } else if (!h.selection.selected) {
      out += "none: no usable NIC\n";
    } else {
      const auto& c = *h.selection.selected;
      out += c.iface + " " + c.address + " (" + c.why + ")\n";
    }
  }

  out += link_lines(in_, 1000, true);
  if (!all_usable()) return out + "\n" + why_unusable();
  const ToolSettings s = settings();
  out += "\nsettings that work for other tools:\n";
  out += "  hvrun " + s.network_interface + "\n";
  std::set<std::string> distinct;
  for (const auto& [host, value] : s.nccl) distinct.insert(value);
  if (distinct.size() == 1) {
    out += "  NCCL_SOCKET_IFNAME=" + *distinct.begin() + " (every host)\n";
  } else {
    for (const auto& [host, value] : s.nccl)
      out += "  " + pad_right(host + ":", host_w + 1) + " NCCL_SOCKET_IFNAME=" + value + "\n";
  }
  if (s.shared_subnet) {
    const std::string cidr = s.shared_subnet->text();
    out += "  Open MPI: mpirun --mca btl_tcp_if_include " + cidr + " --mca oob_tcp_if_include " + cidr + "\n";
  } else {
    out += "  Open MPI: the chosen NICs share no IPv4 subnet; give btl_tcp_if_include per host\n";
  }
  return out;
}

std::string CheckReport::summary(std::size_t width) const { return check_summary(in_, settings(), width); }

std::string CheckReport::matrix(bool colour, std::size_t width) const { return matrix_text(in_, colour, width); }

std::string CheckReport::html() const { return check_html(in_, summary(kDefaultReportWidth)); }

std::string CheckReport::json() const {
  using json = nlohmann::ordered_json;  // keys in the documented order: "ok" first
  json hosts = json::array();
  for (const HostCheck& h : in_.hosts) {
    json host{{"host", h.host},
              {"ssh", {{"ok", !h.ssh_error.has_value()}, {"error", h.ssh_error ? json(*h.ssh_error) : json(nullptr)}}},
              {"agent_version", h.agent_version.empty() ? json(nullptr) : json(h.agent_version)},
              {"interfaces", json::array()},
              {"selected", nullptr}};
    if (!h.ssh_error) {
      for (const InterfaceInfo& nic : h.interfaces) {
        json entry;
        if (const NicVerdict* v = verdict_of(h.selection, nic.name)) {
          json peers = json::array();
          for (const auto& p : v->peers) {
            json peer{{"host", p.peer_host}, {"outcome", p.outcome ? json(to_string(*p.outcome)) : json(nullptr)}};
            if (!p.detail.empty()) peer["detail"] = p.detail;  // only where the prober said why
            peers.push_back(std::move(peer));
          }
          entry = {{"name", v->iface},          {"address", v->address},
                   {"usable", v->usable},       {"reason", v->usable ? json(nullptr) : json(v->reason)},
                   {"probed", !in_.single_host}, {"selected", is_selected(h.selection, v->iface)},
                   {"addresses", v->addresses}, {"peers", peers}};
        } else {
          const SkippedNic* s = skipped_of(h.selection, nic.name);
          entry = {{"name", nic.name},
                   {"address", nic.addresses.empty() ? "" : nic.addresses.front()},
                   {"usable", false},
                   {"reason", s != nullptr ? s->why : "not reported by the NIC selection"},
                   {"probed", false},
                   {"selected", false},
                   {"addresses", nic.addresses},
                   {"peers", json::array()}};
        }
        host["interfaces"].push_back(std::move(entry));
      }
      if (const auto& c = h.selection.selected)
        host["selected"] = {{"interface", c->iface}, {"address", c->address}, {"why", c->why}};
    }
    hosts.push_back(std::move(host));
  }
  json settings_json = nullptr;
  if (all_usable()) {
    const ToolSettings s = settings();
    json nccl = json::object();
    for (const auto& [host, value] : s.nccl) nccl[host] = value;
    settings_json = {{"network_interface", s.network_interface},
                     {"nccl_socket_ifname", nccl},
                     {"open_mpi_if_include", s.shared_subnet ? json(s.shared_subnet->text()) : json(nullptr)}};
  }
  json one_way = json::array();
  for (const OneWayPair& p : one_way_pairs(in_))
    one_way.push_back(
        {{"from", in_.hosts[p.from].host}, {"to", in_.hosts[p.to].host}, {"outcome", to_string(p.outcome)}});
  json grouped = json::array();
  for (const HostCheck& h : in_.hosts)
    for (const NicVerdict& v : h.selection.nics)
      grouped.push_back(
          {{"host", h.host}, {"interface", v.iface}, {"address", v.address}, {"verdict", grouped_outcomes(v)}});
  json links = json::array();
  for (const LinkFigure& f : in_.links) {
    const LinkHost from = f.from < in_.link_hosts.size() ? in_.link_hosts[f.from] : LinkHost{};
    const LinkHost to = f.to < in_.link_hosts.size() ? in_.link_hosts[f.to] : LinkHost{};
    links.push_back({{"from", from.name},
                     {"to", to.name},
                     {"interface", from.iface},
                     {"address", from.address},
                     {"to_address", to.address},
                     {"bytes", f.bytes},
                     {"seconds", static_cast<double>(f.micros) / 1e6},
                     {"mb_per_s", f.measured() ? json(f.mb_per_s()) : json(nullptr)},
                     {"error", f.measured() ? json(nullptr) : json(f.error)}});
  }
  const json doc{{"ok", all_usable()},          {"probe_ms", in_.probe_time.count()},
                 {"hosts", hosts},              {"settings", settings_json},
                 {"not_ready", not_ready_lines(in_)}, {"one_way", one_way},
                 {"grouped", grouped},          {"links", links}};
  return doc.dump(2) + "\n";
}

std::string CheckReport::why_unusable() const {
  if (all_usable()) return {};
  std::string out;
  std::vector<std::string> hints;
  std::vector<std::string> left_out_all;
  for (const HostCheck& h : in_.hosts) {
    if (h.ssh_error) {
      out += h.host + ": ssh failed: " + *h.ssh_error + "\n";
      continue;
    }
    if (h.selection.selected) continue;
    std::vector<std::string> left_out;
    for (const auto& s : h.selection.skipped)
      if (filter_left_out(s)) left_out.push_back(s.iface);
    if (h.selection.nics.empty()) {
      std::vector<std::string> items;
      for (const auto& s : h.selection.skipped) items.push_back(s.iface + ": " + s.why);
      out += "no usable NIC on " + h.host + ": no NIC to probe (" +
             (items.empty() ? std::string("it reported none with an IP address") : join_words(items, "; ")) + ")\n";
    } else {
      std::vector<std::string> reasons;
      for (const auto& v : h.selection.nics) reasons.push_back(v.iface + " " + v.address + ": " + v.reason);
      out += "no usable NIC on " + h.host + ": " + join_words(reasons, "; ") + "\n";
    }
    // Peers that failed to reach a NIC which other peers did reach: the path between them is blocked.
    std::set<std::string> blocked;
    bool reached_by_any = false;
    for (const auto& v : h.selection.nics) {
      const bool some_ok = std::any_of(v.peers.begin(), v.peers.end(),
                                       [](const PeerView& p) { return p.outcome == ProbeOutcome::kOk; });
      reached_by_any = reached_by_any || some_ok;
      if (!some_ok) continue;
      for (const auto& p : v.peers)
        if (p.outcome != ProbeOutcome::kOk) blocked.insert(p.peer_host);
    }
    if (!blocked.empty()) {
      hints.push_back("check firewalls between " + h.host + " and " +
                      join_words(std::vector<std::string>(blocked.begin(), blocked.end())) + " (both directions)");
    } else if (!h.selection.nics.empty() && !reached_by_any) {
      hints.push_back("no other host reached any NIC of " + h.host + ": check that it shares a network with them " +
                      "and that its firewall lets TCP in from them");
    }
    if (!left_out.empty()) {
      for (auto& n : left_out) left_out_all.push_back(n + " on " + h.host);
    }
  }
  if (!left_out_all.empty()) {
    hints.push_back("try --network-interface with one of " + join_words(left_out_all) + ", or without it (it left them out)");
  }
  if (!hints.empty()) out += "what to try: " + join_words(hints, "; ") + "\n";
  return out;
}

}  // namespace hvrun

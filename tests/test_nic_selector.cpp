#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/nic/nic_selector.hpp"
#include "tests/support/nic_lab.hpp"

using namespace hvrun::test::trap_lab;
using hvrun::HostSelection;
using hvrun::NicVerdict;
using hvrun::SkipReason;
using Catch::Contains;
using Strings = std::vector<std::string>;

namespace {

const NicVerdict& verdict(const HostSelection& sel, const std::string& iface) {
  for (const auto& v : sel.nics)
    if (v.iface == iface) return v;
  FAIL("no verdict for " << iface);
  throw std::logic_error("unreachable");
}

Strings outcomes(const NicVerdict& v) {
  Strings out;
  for (const auto& p : v.peers) out.push_back(p.peer_host + "=" + (p.outcome ? to_string(*p.outcome) : "none"));
  return out;
}

std::vector<HostSelection> select(const std::vector<HostInventory>& hosts, const NicFilter& filter = {},
                                  const hvrun::test::ProbeOverride& override = {}) {
  const auto targets = hvrun::probe_targets(hosts, filter, false);
  return hvrun::select_nics(hosts, targets, lab_probe(hosts, targets, override), filter, false);
}

std::string usage_error(const std::vector<HostInventory>& hosts, const NicFilter& filter) {
  try {
    hvrun::probe_targets(hosts, filter, false);
  } catch (const hvrun::UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError");
  return {};
}

// One host with the given NICs, all usable (single host, so nothing needs probing).
HostSelection choose_alone(std::vector<hvrun::InterfaceInfo> nics, const NicFilter& filter = {}) {
  const std::vector<HostInventory> hosts{{"a", "node-a", std::move(nics)}};
  const auto targets = hvrun::probe_targets(hosts, filter, true);
  return hvrun::select_nics(hosts, targets, {}, filter, true).at(0);
}

}  // namespace

TEST_CASE("probe outcomes have one-word names", "[nic_selector]") {
  CHECK(std::string(to_string(ProbeOutcome::kOk)) == "ok");
  CHECK(std::string(to_string(ProbeOutcome::kRefused)) == "refused");
  CHECK(std::string(to_string(ProbeOutcome::kTimeout)) == "timeout");
  CHECK(std::string(to_string(ProbeOutcome::kUnreachable)) == "unreachable");
  CHECK(std::string(to_string(ProbeOutcome::kWrongHost)) == "wrong-host");
  CHECK(std::string(to_string(ProbeOutcome::kAuthFailed)) == "auth-failed");
}

TEST_CASE("probe targets: candidates' addresses, IPv4 first, no loopback, no needless link-local", "[nic_selector]") {
  const auto hosts = lab_hosts(2);
  const auto targets = hvrun::probe_targets(hosts, {}, false);
  const std::vector<ProbeTarget> expected{
      {0, "eth1", "10.77.0.10"},    {0, "eth1", "fd77::10"},   {0, "docker0", "172.17.0.1"},
      {0, "wlp5s0", "192.168.77.10"}, {0, "eth9", "10.88.0.10"},
      {1, "enp6s0", "10.77.0.11"},  {1, "enp6s0", "fd77::11"}, {1, "docker0", "172.17.0.1"},
      {1, "wlp5s0", "192.168.77.11"}, {1, "eth9", "10.88.0.11"}};
  CHECK(targets == expected);

  SECTION("down, not running, excluded and link-local-only NICs offer nothing") {
    auto h = lab_hosts(2);
    h[0].interfaces[3].up = false;       // wlp5s0
    h[0].interfaces[4].running = false;  // eth9
    h[0].interfaces.push_back(make_nic("eth7", {"fe80::7%eth7"}, {64}));
    const auto t = hvrun::probe_targets(h, NicFilter::parse({"^docker"}), false);
    Strings on_a;
    for (const auto& x : t)
      if (x.host == 0) on_a.push_back(x.iface + " " + x.address);
    CHECK(on_a == Strings{"eth1 10.77.0.10", "eth1 fd77::10"});
    const auto sel = hvrun::select_nics(h, t, lab_probe(h, t), NicFilter::parse({"^docker"}), false);
    std::vector<std::pair<std::string, SkipReason>> skipped;
    for (const auto& s : sel[0].skipped) skipped.emplace_back(s.iface, s.reason);
    CHECK(skipped == std::vector<std::pair<std::string, SkipReason>>{{"lo", SkipReason::kLoopback},
                                                                      {"docker0", SkipReason::kExcluded},
                                                                      {"wlp5s0", SkipReason::kDown},
                                                                      {"eth9", SkipReason::kNoCarrier},
                                                                      {"eth7", SkipReason::kLinkLocalOnly}});
    CHECK(sel[0].skipped.back().why == "link-local addresses only: scoped to one link, not routable between hosts");
  }
  SECTION("a NIC enslaved to a bridge (a container veth on docker0) offers nothing, even with an address") {
    auto h = lab_hosts(2);
    auto port = make_nic("vethc1", {"10.99.0.1", "fe80::c1%vethc1"}, {24, 64});
    port.master = "docker0";
    h[0].interfaces.push_back(port);
    const auto t = hvrun::probe_targets(h, {}, false);
    for (const auto& x : t) CHECK(x.iface != "vethc1");
    const auto sel = hvrun::select_nics(h, t, lab_probe(h, t), {}, false);
    REQUIRE_FALSE(sel[0].skipped.empty());
    CHECK(sel[0].skipped.back().iface == "vethc1");
    CHECK(sel[0].skipped.back().reason == SkipReason::kBridgePort);
  }
  SECTION("a subnet inclusion offers only the addresses inside it") {
    const auto t = hvrun::probe_targets(hosts, NicFilter::parse({"fd77::/64"}), false);
    CHECK(t == std::vector<ProbeTarget>{{0, "eth1", "fd77::10"}, {1, "enp6s0", "fd77::11"}});
  }
  SECTION("at most kMaxAddressesPerNic, one of each family first") {
    auto h = lab_hosts(2);
    h[1].interfaces[1].addresses = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "fd00::1", "fd00::2"};
    h[1].interfaces[1].prefix_lengths = {24, 24, 24, 24, 64, 64};
    Strings on_b;
    for (const auto& x : hvrun::probe_targets(h, NicFilter::parse({"=enp6s0,=eth1"}), false))
      if (x.host == 1) on_b.push_back(x.address);
    CHECK(on_b == Strings{"10.0.0.1", "fd00::1", "10.0.0.2", "10.0.0.3"});
  }
  SECTION("single host: loopback is a candidate") {
    const std::vector<HostInventory> one{hosts[0]};
    const auto t = hvrun::probe_targets(one, {}, true);
    REQUIRE(t.size() >= 2);
    CHECK(t[0] == ProbeTarget{0, "lo", "127.0.0.1"});
    CHECK(t[1] == ProbeTarget{0, "lo", "::1"});
  }
}

TEST_CASE("probe order: every host's preferred NIC first, by address, then the next NIC", "[nic_selector]") {
  const auto hosts = lab_hosts(2);
  const auto targets = hvrun::probe_targets(hosts, {}, false);
  // targets: a eth1 v4, v6, docker0, wlp5s0, eth9; then b's the same (indices 5..9).
  CHECK(hvrun::probe_order(hosts, targets, {}, false) == std::vector<std::size_t>{0, 5, 1, 6, 3, 8, 4, 9, 2, 7});
  SECTION("--network-interface order comes first") {
    const NicFilter filter = NicFilter::parse({"eth9,eth1,enp6s0"});
    const auto t = hvrun::probe_targets(hosts, filter, false);
    Strings first;
    for (std::size_t i : hvrun::probe_order(hosts, t, filter, false)) first.push_back(t[i].iface + " " + t[i].address);
    CHECK(first == Strings{"eth9 10.88.0.10", "eth9 10.88.0.11", "eth1 10.77.0.10", "enp6s0 10.77.0.11",
                           "eth1 fd77::10", "enp6s0 fd77::11"});
  }
}

TEST_CASE("the lab's traps: the fabric NIC is chosen on each host and every trap says why", "[nic_selector]") {
  const auto hosts = lab_hosts(4);
  const auto selections = select(hosts);
  REQUIRE(selections.size() == 4);
  const Strings names{"a", "b", "c", "d"};
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    const HostSelection& sel = selections[i];
    REQUIRE(sel.selected);
    CHECK(sel.selected->iface == fabric_name(i));
    CHECK(sel.selected->address == "10.77.0." + std::to_string(10 + i));
    CHECK(sel.selected->why == "the only usable NIC");

    Strings others;
    for (std::size_t p = 0; p < 4; ++p)
      if (p != i) others.push_back(names[p]);
    const std::string peers = others[0] + ", " + others[1] + ", " + others[2];

    const NicVerdict& fabric = verdict(sel, fabric_name(i));
    CHECK(fabric.usable);
    CHECK(fabric.reason.empty());
    CHECK(fabric.addresses == Strings{"10.77.0." + std::to_string(10 + i), "fd77::" + std::to_string(10 + i)});
    CHECK(outcomes(fabric) == Strings{others[0] + "=ok", others[1] + "=ok", others[2] + "=ok"});

    const NicVerdict& docker = verdict(sel, "docker0");
    CHECK_FALSE(docker.usable);
    CHECK(outcomes(docker) ==
          Strings{others[0] + "=wrong-host", others[1] + "=wrong-host", others[2] + "=wrong-host"});
    CHECK(docker.reason ==
          "answered as the prober itself (from " + peers + "): this address exists on every host");
    CHECK(hvrun::nic_summary(names[i], docker) == "docker0 172.17.0.1 on " + names[i] + ": " + docker.reason);

    const NicVerdict& wifi = verdict(sel, "wlp5s0");
    CHECK_FALSE(wifi.usable);
    CHECK(wifi.reason == "no route from " + peers);
    CHECK(hvrun::nic_summary(names[i], wifi) ==
          "wlp5s0 192.168.77." + std::to_string(10 + i) + " on " + names[i] + ": no route from " + peers);

    const NicVerdict& drop = verdict(sel, "eth9");
    CHECK_FALSE(drop.usable);
    CHECK(drop.reason == "no answer within 1 s from " + peers + ": packets dropped?");

    REQUIRE(sel.skipped.size() == 1);
    CHECK(sel.skipped[0].iface == "lo");
    CHECK(sel.skipped[0].why == "loopback: reaches only its own host");
  }
  CHECK(hvrun::shared_ipv4_subnet(hosts, selections)->text() == "10.77.0.0/24");
}

TEST_CASE("a one-way firewall: a's fabric is unusable and the failing direction is named", "[nic_selector]") {
  const auto hosts = lab_hosts(4);
  // c's probes of a time out (a drops what c sends); b's and d's get through.
  const auto selections = select(hosts, {}, [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (from == 2 && t.host == 0 && t.iface == "eth1") return ProbeOutcome::kTimeout;
    return std::nullopt;
  });
  const NicVerdict& fabric = verdict(selections[0], "eth1");
  CHECK_FALSE(fabric.usable);
  CHECK(outcomes(fabric) == Strings{"b=ok", "c=timeout", "d=ok"});
  CHECK(fabric.reason == "reached from b, d but no answer within 1 s from c: packets dropped?");
  CHECK_FALSE(selections[0].selected);
  for (std::size_t i = 1; i < 4; ++i) CHECK(selections[i].selected->iface == fabric_name(i));
  CHECK_FALSE(hvrun::shared_ipv4_subnet(hosts, selections));
}

TEST_CASE("an address every peer reached wins over an earlier one some could not", "[nic_selector]") {
  const auto hosts = lab_hosts(3);
  const auto selections = select(hosts, {}, [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (from == 2 && t.address == "10.77.0.10") return ProbeOutcome::kRefused;
    return std::nullopt;
  });
  REQUIRE(selections[0].selected);
  CHECK(selections[0].selected->address == "fd77::10");
  CHECK(verdict(selections[0], "eth1").usable);

  SECTION("no address common to all peers: unusable, and said so") {
    const auto split = select(hosts, {}, [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
      if (t.host != 0 || t.iface != "eth1") return std::nullopt;
      if (from == 1 && t.address == "fd77::10") return ProbeOutcome::kRefused;
      if (from == 2 && t.address == "10.77.0.10") return ProbeOutcome::kRefused;
      return std::nullopt;
    });
    const NicVerdict& v = verdict(split[0], "eth1");
    CHECK_FALSE(v.usable);
    CHECK(v.reason == "no address of it was reached from every host (b only 10.77.0.10; c only fd77::10)");
  }
}

TEST_CASE("a peer's view keeps the prober's words of the outcome it shows", "[nic_selector]") {
  const auto hosts = lab_hosts(3);
  const auto targets = hvrun::probe_targets(hosts, {}, false);
  auto results = lab_probe(hosts, targets, [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (from != 2 || t.host != 0 || t.iface != "eth1") return std::nullopt;
    return t.address == "10.77.0.10" ? ProbeOutcome::kRefused : ProbeOutcome::kTimeout;
  });
  for (ProbeResult& r : results) {
    if (r.from != 2 || r.to != 0 || r.iface != "eth1") continue;
    r.detail = r.outcome == ProbeOutcome::kRefused ? "Connection refused" : "no answer within the probe timeout";
  }
  const auto selections = hvrun::select_nics(hosts, targets, results, {}, false);
  const NicVerdict& v = verdict(selections[0], "eth1");
  CHECK_FALSE(v.usable);
  REQUIRE(v.peers.size() == 2);
  CHECK(v.peers[0].peer_host == "b");
  CHECK(v.peers[0].detail.empty());  // ok: nothing to say
  CHECK(v.peers[1].peer_host == "c");
  // c's best outcome on eth1 is the refusal (before the timeout in preference), with its own words.
  CHECK(v.peers[1].outcome == ProbeOutcome::kRefused);
  CHECK(v.peers[1].address == "10.77.0.10");
  CHECK(v.peers[1].detail == "Connection refused");
}

TEST_CASE("each outcome has its reason in words", "[nic_selector]") {
  auto hosts = lab_hosts(3);
  SECTION("refused and auth-failed") {
    const auto s = select(hosts, {}, [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
      if (t.host != 0 || t.iface != "eth1") return std::nullopt;
      return from == 1 ? ProbeOutcome::kRefused : ProbeOutcome::kAuthFailed;
    });
    CHECK(verdict(s[0], "eth1").reason ==
          "answered without a valid HMAC from c (another job, or another program on that port); "
          "refused from b (a firewall rejects it?)");
  }
  SECTION("an answer from another host of the job that holds the same address") {
    // a and c both hold 10.5.0.1 on eth5; b's probe of a's lands on c.
    hosts[0].interfaces.push_back(make_nic("eth5", {"10.5.0.1"}, {24}, false));
    hosts[2].interfaces.push_back(make_nic("eth5", {"10.5.0.1"}, {24}, false));
    const auto targets = hvrun::probe_targets(hosts, {}, false);
    auto results = lab_probe(hosts, targets);
    for (auto& r : results) {
      if (r.to == 0 && r.iface == "eth5") {
        r.outcome = ProbeOutcome::kWrongHost;
        r.answered_as = "node-c";  // c's hostname; c itself reached its own eth5
      }
    }
    const auto s = hvrun::select_nics(hosts, targets, results, {}, false);
    CHECK(verdict(s[0], "eth5").reason ==
          "answered as the prober itself (from c): this address exists on a, c; "
          "answered as c from b: c holds this address too");
  }
  SECTION("an answer from outside the job, and a peer that reported nothing") {
    const auto targets = hvrun::probe_targets(hosts, {}, false);
    auto results = lab_probe(hosts, targets);
    std::erase_if(results, [](const hvrun::ProbeResult& r) { return r.from == 2 && r.to == 0; });
    for (auto& r : results) {
      if (r.to == 0 && r.iface == "eth1") {
        r.outcome = ProbeOutcome::kWrongHost;
        r.answered_as = "printer";
      }
    }
    const auto s = hvrun::select_nics(hosts, targets, results, {}, false);
    const NicVerdict& v = verdict(s[0], "eth1");
    CHECK(outcomes(v) == Strings{"b=wrong-host", "c=none"});
    CHECK(v.reason == "answered as 'printer' from b: a machine outside this job holds this address; not probed from c");
  }
}

TEST_CASE("--network-interface: narrows candidates, orders them, and names missing NICs", "[nic_selector]") {
  const auto hosts = lab_hosts(4);
  SECTION("names that differ per host, given in one list") {
    const auto filter = NicFilter::parse({"eth1,enp6s0,enp5s0,ib0"});
    const auto s = select(hosts, filter);
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(s[i].selected->iface == fabric_name(i));
      CHECK(s[i].nics.size() == 1);
      CHECK(s[i].skipped.size() == 4);
    }
    CHECK(s[0].skipped[1].iface == "docker0");
    CHECK(s[0].skipped[1].why == "not named by --network-interface");
  }
  SECTION("a requested NIC missing on a host is a usage error naming the host and its NICs") {
    CHECK(usage_error(hosts, NicFilter::parse({"eth1,enp6s0,enp5s0"})) ==
          "--network-interface: host d has no NIC matching 'eth1' or 'enp6s0' or 'enp5s0' "
          "(it has: lo, ib0, docker0, wlp5s0, eth9)"
          "; list a NIC of every host (names may differ per host: eth1,enp6s0) or leave the option out");
    CHECK(usage_error(hosts, NicFilter::parse({"=enp6s0"})) ==
          "--network-interface: host a has no NIC matching '=enp6s0' (it has: lo, eth1, docker0, wlp5s0, eth9); "
          "c, d have none either"
          "; list a NIC of every host (names may differ per host: eth1,enp6s0) or leave the option out");
    CHECK(usage_error(hosts, NicFilter::parse({"10.99.0.0/16"})) ==
          "--network-interface: host a has no NIC matching '10.99.0.0/16' (it has: lo, eth1, docker0, wlp5s0, eth9); "
          "b, c, d have none either"
          "; list a NIC of every host (names may differ per host: eth1,enp6s0) or leave the option out");
    // Exclusions never ask for a NIC, and a prefix matching something is enough.
    CHECK_NOTHROW(hvrun::probe_targets(hosts, NicFilter::parse({"^enp9s0"}), false));
    CHECK_NOTHROW(hvrun::probe_targets(hosts, NicFilter::parse({"e,ib"}), false));
  }
  SECTION("a filter that leaves only traps leaves hosts without a NIC, not an error") {
    const auto s = select(hosts, NicFilter::parse({"=docker0,eth9"}));
    for (const auto& sel : s) {
      CHECK_FALSE(sel.selected);
      CHECK(sel.nics.size() == 2);
    }
  }
}

TEST_CASE("ranking among usable NICs", "[nic_selector]") {
  using hvrun::InterfaceInfo;
  const InterfaceInfo lo = make_nic("lo", {"127.0.0.1"}, {8});
  const InterfaceInfo slow = make_nic("eth2", {"10.2.0.1"}, {24}, false, 10000);
  const InterfaceInfo fast = make_nic("eth3", {"10.3.0.1"}, {24}, false, 25000);
  const InterfaceInfo unknown = make_nic("eth4", {"10.4.0.1"}, {24}, false, -1);

  SECTION("single host: loopback first") {
    const auto s = choose_alone({fast, lo});
    CHECK(s.selected->iface == "lo");
    CHECK(s.selected->address == "127.0.0.1");
    CHECK(s.selected->why == "loopback, all ranks on one host");
    CHECK(s.nics.size() == 2);
    CHECK(s.nics[0].usable);
    CHECK(s.nics[0].peers.empty());
  }
  SECTION("single host with a filter: the user's NIC") {
    const auto s = choose_alone({lo, slow, fast}, NicFilter::parse({"=eth2"}));
    CHECK(s.selected->iface == "eth2");
    CHECK(s.selected->why == "the only usable NIC");
  }
  SECTION("faster wins; unknown speed counts as slowest") {
    const auto s = choose_alone({unknown, slow, fast}, NicFilter::parse({"eth"}));
    CHECK(s.selected->iface == "eth3");
    CHECK(s.selected->why == "faster than eth2 (25000 Mb/s vs 10000 Mb/s)");
    const auto t = choose_alone({unknown, slow}, NicFilter::parse({"eth"}));
    CHECK(t.selected->iface == "eth2");
    CHECK(t.selected->why == "faster than eth4 (10000 Mb/s vs unknown)");
  }
  SECTION("the user's order beats speed") {
    const auto s = choose_alone({fast, slow}, NicFilter::parse({"eth2,eth3"}));
    CHECK(s.selected->iface == "eth2");
    CHECK(s.selected->why == "earlier in --network-interface than eth3");
  }
  SECTION("physical beats virtual; a virtual name ranks below any other virtual NIC") {
    const InterfaceInfo physical = make_nic("eth5", {"10.5.0.1"}, {24}, false, 1000);
    const InterfaceInfo veth_like = make_nic("ens3", {"10.6.0.1"}, {24}, true, 10000);
    const InterfaceInfo bridge = make_nic("br-fab", {"10.7.0.1"}, {24}, true, 10000);
    const InterfaceInfo veth = make_nic("veth1", {"10.8.0.1"}, {24}, true, 40000);
    const NicFilter no_lo = NicFilter::parse({"^lo"});
    const auto s = choose_alone({veth, bridge, veth_like, physical}, no_lo);
    CHECK(s.selected->iface == "eth5");
    CHECK(s.selected->why == "physical; ens3 is virtual");
    const auto t = choose_alone({veth, bridge, veth_like}, no_lo);
    CHECK(t.selected->iface == "ens3");
    CHECK(t.selected->why == "veth1 is container or VM plumbing by its name");
    const auto u = choose_alone({bridge, veth}, no_lo);  // both named as plumbing: the faster
    CHECK(u.selected->iface == "veth1");
    const auto w = choose_alone({make_nic("eth6", {"10.9.0.1"}, {24}, false, 1000), physical}, no_lo);
    CHECK(w.selected->why == "before eth5 in the kernel's order, otherwise equal");
    CHECK(w.selected->iface == "eth6");
  }
  SECTION("virtual names") {
    for (const char* name : {"docker0", "veth12ab", "virbr0", "br-3f2a", "cni0", "flannel.1", "cali123"})
      CHECK(hvrun::has_virtual_name(name));
    for (const char* name : {"eth0", "enp6s0", "ib0", "bridge0", "wlp5s0"}) CHECK_FALSE(hvrun::has_virtual_name(name));
  }
  SECTION("the choice is per host: names may differ") {
    std::vector<HostInventory> hosts{{"a", "", {lo, slow, fast}}, {"b", "", {lo, make_nic("ib0", {"10.9.0.2"}, {24})}}};
    const auto targets = hvrun::probe_targets(hosts, {}, false);
    const auto s = hvrun::select_nics(hosts, targets, lab_probe(hosts, targets), {}, false);
    CHECK(s[0].selected->iface == "eth3");
    CHECK(s[1].selected->iface == "ib0");
    CHECK_FALSE(hvrun::shared_ipv4_subnet(hosts, s));  // different subnets
  }
}

TEST_CASE("shared_ipv4_subnet needs the same IPv4 subnet and prefix on every host", "[nic_selector]") {
  auto hosts = lab_hosts(2);
  auto s = select(hosts);
  CHECK(hvrun::shared_ipv4_subnet(hosts, s)->text() == "10.77.0.0/24");
  hosts[1].interfaces[1].prefix_lengths[0] = 16;
  CHECK_FALSE(hvrun::shared_ipv4_subnet(hosts, s));
  hosts[1].interfaces[1].prefix_lengths.clear();  // an old agent that sent no prefix lengths
  CHECK_FALSE(hvrun::shared_ipv4_subnet(hosts, s));
  hosts = lab_hosts(2);
  s[1].selected->address = "fd77::11";
  CHECK_FALSE(hvrun::shared_ipv4_subnet(hosts, s));
  s[1].selected.reset();
  CHECK_FALSE(hvrun::shared_ipv4_subnet(hosts, s));
}

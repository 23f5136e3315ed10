// The bounded probe set (launcher/nic/probe_peers.hpp): who probes whom, what it covers, what it costs,
// and that the NIC choice on the trap lab is the same with it as with all pairs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "launcher/nic/ip_subnet.hpp"
#include "launcher/nic/probe_peers.hpp"
#include "tests/support/nic_lab.hpp"

using namespace hvrun::test::trap_lab;
using Probers = std::vector<std::vector<std::size_t>>;

namespace {

// n hosts, each with a fabric NIC on one subnet shared by all (10.77.0.0/16) and a rack NIC on its
// rack's subnet (10.(100+rack).0.0/24), racks interleaved (host i in rack i % racks) so that ring
// neighbours never share a rack.
std::vector<HostInventory> racked_hosts(std::size_t n, std::size_t racks) {
  std::vector<HostInventory> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string a = std::to_string(i / 200) + "." + std::to_string(10 + i % 200);
    const std::string rack = "10." + std::to_string(100 + i % racks) + "." + a;
    out.push_back({"h" + std::to_string(i),
                   "node-" + std::to_string(i),
                   {make_nic("lo", {"127.0.0.1"}, {8}), make_nic("eth0", {"10.77." + a}, {16}),
                    make_nic("rack0", {rack}, {16})}});
  }
  return out;
}

std::vector<ProbeTarget> targets_of(const std::vector<HostInventory>& hosts) {
  return hvrun::probe_targets(hosts, {}, false);
}

std::string subnet(const HostInventory& h, const ProbeTarget& t) {
  for (const auto& nic : h.interfaces)
    for (std::size_t i = 0; i < nic.addresses.size(); ++i)
      if (nic.name == t.iface && nic.addresses[i] == t.address)
        return hvrun::IpSubnet::of(t.address, nic.prefix_lengths[i])->text();
  return {};
}

// The results a job would get: lab_probe's answers, only from each target's probers.
std::vector<ProbeResult> probed_by(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                   const Probers& probers, const hvrun::test::ProbeOverride& override = {}) {
  auto all = lab_probe(hosts, targets, override);
  std::erase_if(all, [&](const ProbeResult& r) {
    const auto& p = probers[r.to];
    return std::find(p.begin(), p.end(), r.from) == p.end();
  });
  return all;
}

}  // namespace

TEST_CASE("probe peers: every host is probed by at least min(k, n-1) distinct other hosts", "[probe_peers]") {
  for (std::size_t n : {1u, 2u, 3u, 5u, 6u, 10u, 64u, 257u}) {
    const auto hosts = racked_hosts(n, 1);
    const auto targets = targets_of(hosts);
    for (std::size_t k : {1u, 2u, 3u, 4u, 8u}) {
      const Probers probers = hvrun::choose_probe_peers(hosts, targets, k, 7);
      REQUIRE(probers.size() == n);
      for (std::size_t h = 0; h < n; ++h) {
        INFO("n=" << n << " k=" << k << " host " << h);
        const auto& p = probers[h];
        CHECK(p.size() >= std::min(k, n - 1));
        CHECK(std::set<std::size_t>(p.begin(), p.end()).size() == p.size());  // distinct
        CHECK(std::find(p.begin(), p.end(), h) == p.end());                   // never itself
        CHECK(std::all_of(p.begin(), p.end(), [&](std::size_t x) { return x < n; }));
        CHECK(std::is_sorted(p.begin(), p.end()));
        if (n > k + 1) {
          CHECK(std::find(p.begin(), p.end(), (h + n - 1) % n) != p.end());  // ring predecessor
          if (k >= 2) CHECK(std::find(p.begin(), p.end(), (h + 1) % n) != p.end());  // ring successor
        } else {
          CHECK(p.size() == n - 1);  // small jobs: all pairs
        }
      }
    }
  }
}

TEST_CASE("probe peers: 0 and small jobs mean all pairs; --check-only defaults to all pairs", "[probe_peers]") {
  const auto hosts = racked_hosts(12, 3);
  const auto targets = targets_of(hosts);
  const Probers all = hvrun::choose_probe_peers(hosts, targets, 0, 1);
  for (std::size_t h = 0; h < hosts.size(); ++h) CHECK(all[h].size() == hosts.size() - 1);
  CHECK(hvrun::probe_count(targets, all) == targets.size() * (hosts.size() - 1));
  CHECK(hvrun::probe_peer_count(std::nullopt, false) == hvrun::kDefaultProbePeers);
  CHECK(hvrun::probe_peer_count(std::nullopt, true) == 0);
  CHECK(hvrun::probe_peer_count(2, true) == 2);
  CHECK(hvrun::probe_peer_count(0, false) == 0);
}

TEST_CASE("probe peers: every NIC's subnet is verified from inside it", "[probe_peers]") {
  // Racks of 8 hosts interleaved: no ring neighbour and few random peers share a host's rack subnet.
  const auto hosts = racked_hosts(64, 8);
  const auto targets = targets_of(hosts);
  for (std::size_t k : {1u, 2u, 4u}) {
    const Probers probers = hvrun::choose_probe_peers(hosts, targets, k, 3);
    for (const ProbeTarget& t : targets) {
      const std::string s = subnet(hosts[t.host], t);
      const bool covered = std::any_of(probers[t.host].begin(), probers[t.host].end(), [&](std::size_t p) {
        return std::any_of(targets.begin(), targets.end(),
                           [&](const ProbeTarget& o) { return o.host == p && subnet(hosts[p], o) == s; });
      });
      INFO("k=" << k << " " << t.iface << " " << t.address << " of " << hosts[t.host].host << " (" << s << ")");
      CHECK(covered);
    }
    // One extra prober at most per subnet of the host (its rack's): k + 1 in all.
    for (const auto& p : probers) CHECK(p.size() <= k + 1);
  }
}

TEST_CASE("probe peers: the same seed and host list give the same set", "[probe_peers]") {
  const auto hosts = racked_hosts(64, 4);
  const auto targets = targets_of(hosts);
  const Probers a = hvrun::choose_probe_peers(hosts, targets, 4, 42);
  CHECK(a == hvrun::choose_probe_peers(hosts, targets, 4, 42));
  CHECK(a != hvrun::choose_probe_peers(hosts, targets, 4, 43));  // the random peers follow the seed
  auto renamed = hosts;
  renamed[5].host = "other";
  CHECK(a != hvrun::choose_probe_peers(renamed, targets, 4, 42));  // and the host list
}

TEST_CASE("probe peers: probes sent grow as n*k, not n squared", "[probe_peers]") {
  // The trap lab's NICs: every subnet is on every host, so no prober is added for coverage and the
  // count is exact: each host's targets times k.
  for (std::size_t n : {8u, 16u, 26u}) {
    const auto hosts = lab_hosts(n);
    const auto targets = targets_of(hosts);
    const std::size_t per_host = targets.size() / n;
    REQUIRE(per_host * n == targets.size());
    for (std::size_t k : {2u, 3u, 4u}) {
      INFO("n=" << n << " k=" << k);
      CHECK(hvrun::probe_count(targets, hvrun::choose_probe_peers(hosts, targets, k, 0)) == n * k * per_host);
    }
    CHECK(hvrun::probe_count(targets, hvrun::choose_probe_peers(hosts, targets, 0, 0)) == n * (n - 1) * per_host);
  }
  // With rack subnets: at most one more prober per host, so at most n * (k + 1) * targets per host.
  for (std::size_t n : {64u, 512u, 1000u}) {
    const auto hosts = racked_hosts(n, 16);
    const auto targets = targets_of(hosts);
    const std::size_t count = hvrun::probe_count(targets, hvrun::choose_probe_peers(hosts, targets, 4, 0));
    INFO("n=" << n);
    CHECK(count >= n * 4 * 2);
    CHECK(count <= n * 5 * 2);
  }
}

TEST_CASE("probe peers: the trap lab chooses the same NICs with the bounded set as with all pairs", "[probe_peers]") {
  const auto hosts = lab_hosts(8);
  const auto targets = targets_of(hosts);
  const auto all_pairs = hvrun::select_nics(hosts, targets, lab_probe(hosts, targets), {}, false);
  for (std::size_t k : {1u, 2u, 3u}) {
    const Probers probers = hvrun::choose_probe_peers(hosts, targets, k, 0);
    const auto bounded = hvrun::select_nics(hosts, targets, probed_by(hosts, targets, probers), {}, false, probers);
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      INFO("k=" << k << " host " << hosts[h].host);
      REQUIRE(bounded[h].selected);
      CHECK(*bounded[h].selected == *all_pairs[h].selected);
      CHECK(bounded[h].selected->iface == hvrun::test::fabric_name(h));
      for (const auto& v : bounded[h].nics) {
        CHECK(v.peers.size() == probers[h].size());  // judged by its probers only
        if (v.iface == "docker0" || v.iface == "wlp5s0" || v.iface == "eth9") CHECK_FALSE(v.usable);
      }
    }
  }
}

TEST_CASE("probe peers: a failure between probers is caught; one between hosts that never probe each other is not",
          "[probe_peers]") {
  // The guarantee of docs/DESIGN.md §5.3, as data: with k = 2 on 8 hosts, host c (2) is probed by b and d
  // only. A firewall between c and f (5) is invisible to the bounded set; one between c and d is not.
  const auto hosts = lab_hosts(8);
  const auto targets = targets_of(hosts);
  const Probers probers = hvrun::choose_probe_peers(hosts, targets, 2, 0);
  REQUIRE(probers[2] == std::vector<std::size_t>{1, 3});
  REQUIRE(probers[5] == std::vector<std::size_t>{4, 6});
  const auto between = [](std::size_t x, std::size_t y) {
    return [x, y](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
      if ((from == x && t.host == y) || (from == y && t.host == x)) return ProbeOutcome::kTimeout;
      return std::nullopt;
    };
  };
  const auto missed =
      hvrun::select_nics(hosts, targets, probed_by(hosts, targets, probers, between(2, 5)), {}, false, probers);
  CHECK(missed[2].selected);
  CHECK(missed[5].selected);
  const auto caught =
      hvrun::select_nics(hosts, targets, probed_by(hosts, targets, probers, between(2, 3)), {}, false, probers);
  CHECK_FALSE(caught[2].selected);
  CHECK_FALSE(caught[3].selected);
  // All pairs (what --check-only does) sees the first one too.
  const auto exhaustive = hvrun::select_nics(hosts, targets, lab_probe(hosts, targets, between(2, 5)), {}, false);
  CHECK_FALSE(exhaustive[2].selected);
  CHECK_FALSE(exhaustive[5].selected);
}

// The probe round (launcher/nic/probe_round.hpp) on the synthetic trap lab: what it plans, when its
// decision is final, what it decides, and which probes it sends again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/nic/probe_retry.hpp"
#include "launcher/nic/probe_round.hpp"
#include "tests/support/nic_lab.hpp"

using namespace hvrun::test::trap_lab;
using hvrun::ProbeRound;

namespace {

std::vector<std::size_t> first_members(std::size_t n) {
  std::vector<std::size_t> m(n);
  for (std::size_t i = 0; i < n; ++i) m[i] = i;
  return m;
}

// The lab's answers to `probes` of the round, as its agents would send them.
std::vector<ProbeResult> answers(const ProbeRound& round, const std::vector<ProbeRound::Probe>& probes,
                                 const hvrun::test::ProbeOverride& override = {}) {
  const auto all = lab_probe(round.inventories(), round.targets(), override);
  std::vector<ProbeResult> out;
  for (const auto& [from, ti] : probes) {
    const ProbeTarget& t = round.targets()[ti];
    const auto it = std::find_if(all.begin(), all.end(), [&](const ProbeResult& r) {
      return r.from == from && r.to == t.host && r.address == t.address;
    });
    REQUIRE(it != all.end());
    out.push_back(*it);
  }
  return out;
}

// Adds the lab's answers to `probes`, then to the probes each answer added to the plan (a NIC's next
// address), as NicDiscovery sends them; returns what the last add returned (the round is complete).
bool feed(ProbeRound& round, std::vector<ProbeRound::Probe> probes, const hvrun::test::ProbeOverride& override = {}) {
  bool complete = false;
  while (!probes.empty()) {
    for (const ProbeResult& r : answers(round, probes, override)) complete = round.add(r);
    probes = round.take_released();
  }
  return complete;
}

}  // namespace

TEST_CASE("probe round: all pairs planned, complete when every probe answered, the fabric chosen", "[probe_round]") {
  ProbeRound round(first_members(4), lab_hosts(4), {}, false, 0, false);
  // Every target from every other host: 4 hosts offering fabric (2 addresses), docker0, wlp5s0, eth9.
  CHECK(round.targets().size() == 4 * 5);
  CHECK(round.planned().size() == round.targets().size() * 3);
  CHECK(round.probes_sent() == round.planned().size());
  // The deciding probes first: every host's fabric NIC before any other NIC.
  const std::size_t fabric_probes = 4 * 2 * 3;
  for (std::size_t p = 0; p < fabric_probes; ++p) {
    const ProbeTarget& t = round.targets()[round.planned()[p].second];
    CHECK(t.iface == fabric_name(t.host));
  }
  const auto results = answers(round, round.planned());
  for (std::size_t k = 0; k < results.size(); ++k) {
    CHECK(round.add(results[k]) == (k + 1 == results.size()));
    CHECK_FALSE(round.decision_is_final());  // --check-only waits for every result
  }
  round.decide();
  REQUIRE(round.every_member_chosen());
  for (std::size_t h = 0; h < 4; ++h) {
    const auto c = round.choice_of(h);
    REQUIRE(c);
    CHECK(c->iface == fabric_name(h));
    CHECK(c->address == "10.77.0." + std::to_string(10 + h));
  }
  CHECK(round.retry().empty());
  CHECK(round.attempts() == 1);
}

TEST_CASE("probe round: a launch's decision is final once no pending probe can change it", "[probe_round]") {
  ProbeRound round(first_members(4), lab_hosts(4), {}, false, 0, true);
  const auto results = answers(round, round.planned());
  auto is_fabric = [&](const ProbeResult& r) { return r.iface == fabric_name(r.to); };
  CHECK_FALSE(round.decision_is_final());
  // Every fabric answer but a's probes of d: d's choice could still change.
  for (const ProbeResult& r : results)
    if (is_fabric(r) && !(r.from == 0 && r.to == 3)) round.add(r);
  CHECK_FALSE(round.decision_is_final());
  for (const ProbeResult& r : results)
    if (is_fabric(r) && r.from == 0 && r.to == 3) round.add(r);
  // docker0, wlp5s0 and the dropping eth9 are still out, and cannot beat the fabric NICs.
  CHECK(round.decision_is_final());
  round.decide();
  CHECK(round.every_member_chosen());
  CHECK(round.choice_of(3)->iface == fabric_name(3));
}

TEST_CASE("probe round: timeouts and no routes towards a host without a usable NIC are retried, then it gives up",
          "[probe_round]") {
  // b's fabric drops everything (as eth9 does everywhere): b has no usable NIC.
  const auto drop_b = [](std::size_t, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (t.host == 1 && t.iface == fabric_name(1)) return ProbeOutcome::kTimeout;
    return std::nullopt;
  };
  ProbeRound round(first_members(4), lab_hosts(4), {}, false, 0, true);
  CHECK(feed(round, round.planned(), drop_b));
  round.decide();
  CHECK_FALSE(round.every_member_chosen());
  CHECK_FALSE(round.choice_of(1));
  CHECK(round.choice_of(0));
  const std::size_t first = round.probes_sent();

  std::vector<ProbeRound::Probe> again = round.retry();
  // From each of b's 3 probers: b's 2 fabric addresses (the IPv6 one was probed once the IPv4 one timed
  // out) and eth9's address, the ones that timed out, and the dead NIC's, where no route was found.
  REQUIRE(again.size() == 12);
  for (const auto& [from, ti] : again) {
    CHECK(round.targets()[ti].host == 1);
    CHECK(from != 1);
  }
  CHECK(round.attempts() == 2);
  CHECK(round.probes_sent() == first + 12);
  // The second attempt also times out, the third does not come: kMaxProbeAttempts in all.
  const auto second = answers(round, again, drop_b);
  for (std::size_t k = 0; k < second.size(); ++k) CHECK(round.add(second[k]) == (k + 1 == second.size()));
  round.decide();
  again = round.retry();
  CHECK(again.size() == 12);
  CHECK(round.attempts() == hvrun::kMaxProbeAttempts);
  for (const ProbeResult& r : answers(round, again, drop_b)) round.add(r);
  round.decide();
  CHECK(round.retry().empty());
  CHECK_FALSE(round.choice_of(1));
}

TEST_CASE("probe round: a retry that gets through gives the host its NIC", "[probe_round]") {
  bool dropping = true;
  const auto drop_b = [&](std::size_t, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (dropping && t.host == 1 && t.iface == fabric_name(1)) return ProbeOutcome::kTimeout;
    return std::nullopt;
  };
  ProbeRound round(first_members(4), lab_hosts(4), {}, false, 0, true);
  feed(round, round.planned(), drop_b);
  round.decide();
  const auto again = round.retry();
  REQUIRE_FALSE(again.empty());
  dropping = false;  // the SYNs that were lost get through now
  for (const ProbeResult& r : answers(round, again, drop_b)) round.add(r);
  round.decide();
  CHECK(round.every_member_chosen());
  CHECK(round.choice_of(1)->iface == fabric_name(1));
  CHECK(round.retry().empty());
}

TEST_CASE("probe round: a launch probes a NIC's next address only once some prober missed the one before",
          "[probe_round]") {
  // The lab's fabric NICs offer an IPv4 and an IPv6 address; the other NICs one address each.
  ProbeRound check(first_members(4), lab_hosts(4), {}, false, 0, false);
  CHECK(check.planned().size() == 4 * 5 * 3);  // --check-only: every address, to report each
  ProbeRound round(first_members(4), lab_hosts(4), {}, false, 0, true);
  CHECK(round.planned().size() == 4 * 4 * 3);  // a launch: the fabric's IPv6 addresses wait
  for (const auto& [from, ti] : round.planned())
    CHECK(round.targets()[ti].address.find(':') == std::string::npos);

  // a's probe of b's fabric IPv4 address is refused (a firewall rule on that address, say).
  const auto refuse_a_b4 = [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (from == 0 && t.host == 1 && t.iface == fabric_name(1) && t.address.find(':') == std::string::npos)
      return ProbeOutcome::kRefused;
    return std::nullopt;
  };
  const std::size_t planned = round.planned().size();
  std::vector<ProbeRound::Probe> released;
  for (const ProbeResult& r : answers(round, round.planned(), refuse_a_b4)) {
    round.add(r);
    for (const auto& p : round.take_released()) released.push_back(p);
  }
  // b's IPv6 address, from each of its 3 probers (the others reached the IPv4 one, but a NIC's address must
  // be reached by every prober); nothing for the other hosts.
  REQUIRE(released.size() == 3);
  for (const auto& [from, ti] : released) {
    CHECK(round.targets()[ti].host == 1);
    CHECK(round.targets()[ti].iface == fabric_name(1));
    CHECK(round.targets()[ti].address.find(':') != std::string::npos);
  }
  CHECK(round.planned().size() == planned + 3);
  CHECK(round.probes_sent() == planned + 3);
  CHECK_FALSE(round.decision_is_final());  // b's IPv6 answers could still give it its fabric NIC
  CHECK(feed(round, released, refuse_a_b4));
  CHECK(round.decision_is_final());
  round.decide();
  REQUIRE(round.choice_of(1));
  CHECK(round.choice_of(1)->iface == fabric_name(1));
  CHECK(round.choice_of(1)->address.find(':') != std::string::npos);
  CHECK(round.choice_of(0)->address.find(':') == std::string::npos);
  CHECK(round.take_released().empty());
  // A late answer after the decision (c's probe of d's fabric, refused this time) adds no probe.
  const std::size_t sent = round.probes_sent();
  for (const auto& [from, ti] : round.planned())
    if (from == 2 && round.targets()[ti].host == 3 && round.targets()[ti].iface == fabric_name(3)) {
      ProbeResult late;
      late.from = from;
      late.to = 3;
      late.iface = round.targets()[ti].iface;
      late.address = round.targets()[ti].address;
      late.outcome = ProbeOutcome::kRefused;
      round.add(late);
    }
  CHECK(round.take_released().empty());
  CHECK(round.probes_sent() == sent);
}

TEST_CASE("probe round: members are the hosts with an agent; the filter's missing NICs are a usage error",
          "[probe_round]") {
  // --check-only where host 1 of 4 did not come up: the members are 0, 2, 3.
  auto inventories = lab_hosts(4);
  inventories.erase(inventories.begin() + 1);
  ProbeRound round({0, 2, 3}, inventories, {}, false, 0, false);
  CHECK(round.member_of(0) == 0u);
  CHECK_FALSE(round.member_of(1));
  CHECK(round.member_of(3) == 2u);
  for (const ProbeResult& r : answers(round, round.planned())) round.add(r);
  round.decide();
  CHECK_FALSE(round.choice_of(1));
  REQUIRE(round.choice_of(3));
  CHECK(round.choice_of(3)->iface == fabric_name(3));  // inventory d's NIC, member 2

  CHECK_THROWS_AS(ProbeRound(first_members(4), lab_hosts(4), hvrun::NicFilter::parse({"enp6s0"}), false, 0, false),
                  hvrun::UsageError);
}

TEST_CASE("probes to retry: timeouts and no routes towards unselected hosts only, each probe once, in order",
          "[probe_round]") {
  const auto hosts = lab_hosts(3);
  const auto targets = hvrun::probe_targets(hosts, NicFilter{}, false);
  std::vector<hvrun::HostSelection> selections(3);
  selections[0].selected = hvrun::NicChoice{};  // host 0 has a NIC: nothing towards it goes again
  // Target indexes of host 1's and host 0's first address.
  std::size_t t1 = targets.size(), t0 = targets.size();
  for (std::size_t t = 0; t < targets.size(); ++t) {
    if (targets[t].host == 1 && t1 == targets.size()) t1 = t;
    if (targets[t].host == 0 && t0 == targets.size()) t0 = t;
  }
  REQUIRE(t1 < targets.size());
  REQUIRE(t0 < targets.size());
  auto result = [&](std::size_t from, std::size_t t, ProbeOutcome outcome) {
    ProbeResult r;
    r.from = from;
    r.to = targets[t].host;
    r.iface = targets[t].iface;
    r.address = targets[t].address;
    r.outcome = outcome;
    return r;
  };
  const std::vector<ProbeResult> results = {
      result(2, t1, ProbeOutcome::kTimeout), result(0, t1, ProbeOutcome::kTimeout),
      result(2, t1, ProbeOutcome::kTimeout),  // the same probe twice (a late result): sent again once
      result(1, t0, ProbeOutcome::kTimeout),  // towards host 0, which has its NIC
      result(0, t1, ProbeOutcome::kRefused),  // something answered: never sent again
      result(1, t1, ProbeOutcome::kUnreachable),  // no route (a failed neighbour resolution, say)
      result(1, t0, ProbeOutcome::kUnreachable),  // towards host 0, which has its NIC
  };
  const auto again = hvrun::probes_to_retry(targets, results, selections);
  const std::vector<std::pair<std::size_t, std::size_t>> expected = {{0, t1}, {1, t1}, {2, t1}};
  CHECK(again == expected);
}

TEST_CASE("probe round: an attempt judged at its deadline, then its late answers: each probe counts once",
          "[probe_round]") {
  bool dropping = true;
  const auto drop_b = [&](std::size_t, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (dropping && t.host == 1 && t.iface == fabric_name(1)) return ProbeOutcome::kTimeout;
    return std::nullopt;
  };
  ProbeRound round(first_members(4), lab_hosts(4), {}, false, 0, true);
  const auto first = answers(round, round.planned(), drop_b);
  // Every answer but the last three arrives (with the answers to the next addresses they call for); the
  // deadline judges; b has no NIC yet: probes go again.
  for (std::size_t k = 0; k + 3 < first.size(); ++k) {
    CHECK_FALSE(round.add(first[k]));
    feed(round, round.take_released(), drop_b);
  }
  round.decide();
  const auto again = round.retry();
  REQUIRE_FALSE(again.empty());
  // The first attempt's last three answers arrive late: still waiting for the second attempt.
  for (std::size_t k = first.size() - 3; k < first.size(); ++k) CHECK_FALSE(round.add(first[k]));
  dropping = false;
  const auto second = answers(round, again, drop_b);
  bool complete = false;
  for (const ProbeResult& r : second) complete = round.add(r);
  CHECK(complete);
  round.decide();
  CHECK(round.every_member_chosen());
  // A late duplicate of a timeout does not come back as a second probe to send.
  for (const ProbeResult& r : second) round.add(r);
  CHECK(round.retry().empty());
}

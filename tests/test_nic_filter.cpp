#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/nic/ip_subnet.hpp"
#include "launcher/nic/nic_filter.hpp"

using hvrun::InterfaceInfo;
using hvrun::IpSubnet;
using hvrun::NicFilter;
using Strings = std::vector<std::string>;

namespace {

InterfaceInfo nic(const std::string& name, Strings addresses = {}) {
  InterfaceInfo n;
  n.name = name;
  n.addresses = std::move(addresses);
  n.up = n.running = true;
  return n;
}

NicFilter filter(const Strings& values) { return NicFilter::parse(values); }

// The names of `nics` the filter lets through.
Strings passing(const NicFilter& f, const std::vector<InterfaceInfo>& nics) {
  Strings out;
  for (const auto& n : nics)
    if (f.allows(n)) out.push_back(n.name);
  return out;
}

std::string usage_error(const Strings& values) {
  try {
    NicFilter::parse(values);
  } catch (const hvrun::UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError for: " << Catch::Detail::stringify(values));
  return {};
}

const std::vector<InterfaceInfo> kHost{
    nic("lo", {"127.0.0.1", "::1"}),
    nic("eth0", {"192.168.1.5"}),
    nic("eth1", {"10.77.0.10", "fd77::a", "fe80::1%eth1"}),
    nic("eth10", {"10.1.0.3"}),
    nic("docker0", {"172.17.0.1"}),
    nic("enp6s0", {"10.0.0.7"}),
    nic("ib0", {"10.0.1.7"}),
};

}  // namespace

TEST_CASE("ip subnets: parse, canonical text, containment", "[nic_filter]") {
  const auto v4 = IpSubnet::parse("10.0.0.7/24");
  REQUIRE(v4);
  CHECK(v4->text() == "10.0.0.0/24");
  CHECK_FALSE(v4->is_ipv6());
  CHECK(v4->prefix_length() == 24);
  CHECK(v4->contains("10.0.0.255"));
  CHECK_FALSE(v4->contains("10.0.1.0"));
  CHECK_FALSE(v4->contains("fd77::1"));
  CHECK_FALSE(v4->contains("eth0"));

  const auto v6 = IpSubnet::parse("fd77:0:0:0::5/64");
  REQUIRE(v6);
  CHECK(v6->text() == "fd77::/64");
  CHECK(v6->contains("fd77::a"));
  CHECK(v6->contains("fd77::a%eth1"));  // a scope suffix is ignored
  CHECK_FALSE(v6->contains("fd78::a"));
  CHECK_FALSE(v6->contains("10.0.0.1"));

  CHECK(IpSubnet::parse("0.0.0.0/0")->contains("8.8.8.8"));
  CHECK(IpSubnet::parse("10.1.2.3/32")->text() == "10.1.2.3/32");
  CHECK(IpSubnet::parse("fe80::/10")->contains("fe80::1%eth0"));
  CHECK(IpSubnet::of("10.77.0.13", 24) == IpSubnet::parse("10.77.0.0/24"));
  CHECK_FALSE(IpSubnet::of("10.77.0.13", 33));
  CHECK_FALSE(IpSubnet::of("eth0", 8));

  std::string why;
  CHECK_FALSE(IpSubnet::parse("10.0.0.0/33", &why));
  CHECK(why == "prefix length 33 is out of range 0..32");
  CHECK_FALSE(IpSubnet::parse("fd77::/129", &why));
  CHECK(why == "prefix length 129 is out of range 0..128");
  CHECK_FALSE(IpSubnet::parse("10.0.0/24", &why));
  CHECK(why == "'10.0.0' is not an IPv4 or IPv6 address");
  CHECK_FALSE(IpSubnet::parse("10.0.0.0/", &why));
  CHECK(why == "prefix length '' is not a number");
  CHECK_FALSE(IpSubnet::parse("10.0.0.0/-1", &why));
  CHECK_FALSE(IpSubnet::parse("10.0.0.0/2x", &why));
  CHECK_FALSE(IpSubnet::parse("10.0.0.0/24/8", &why));

  CHECK(hvrun::is_ipv4_address("10.0.0.1"));
  CHECK_FALSE(hvrun::is_ipv4_address("fd77::1"));
  CHECK(hvrun::is_ipv6_link_local("fe80::1%eth1"));
  CHECK(hvrun::is_ipv6_link_local("febf::1"));
  CHECK_FALSE(hvrun::is_ipv6_link_local("fec0::1"));
  CHECK_FALSE(hvrun::is_ipv6_link_local("fd77::1"));
}

TEST_CASE("an empty filter lets every NIC through", "[nic_filter]") {
  const NicFilter f = filter({});
  CHECK(f.empty());
  CHECK_FALSE(f.has_inclusions());
  CHECK(passing(f, kHost).size() == kHost.size());
  CHECK_FALSE(f.order(kHost[1]));
  CHECK(f.selects_any({}));
  CHECK(f.values().empty());
  CHECK(f.text().empty());
  CHECK(f == NicFilter());
}

TEST_CASE("a plain item is a name prefix; = makes it exact", "[nic_filter]") {
  CHECK(passing(filter({"eth"}), kHost) == Strings{"eth0", "eth1", "eth10"});
  CHECK(passing(filter({"eth1"}), kHost) == Strings{"eth1", "eth10"});  // NCCL's rule: eth1 matches eth10
  CHECK(passing(filter({"=eth1"}), kHost) == Strings{"eth1"});
  // A leading '=' makes the whole list exact, as in NCCL_SOCKET_IFNAME.
  CHECK(passing(filter({"=eth1,ib"}), kHost) == Strings{"eth1"});
  CHECK(passing(filter({"=eth1,ib0"}), kHost) == Strings{"eth1", "ib0"});
  CHECK(passing(filter({"eth1,ib"}), kHost) == Strings{"eth1", "eth10", "ib0"});
}

TEST_CASE("a leading ^ makes the whole list exclusions; ^= exact exclusions", "[nic_filter]") {
  CHECK(passing(filter({"^docker,lo"}), kHost) == Strings{"eth0", "eth1", "eth10", "enp6s0", "ib0"});
  CHECK(passing(filter({"^eth1"}), kHost) == Strings{"lo", "eth0", "docker0", "enp6s0", "ib0"});
  CHECK(passing(filter({"^=eth1,lo"}), kHost) == Strings{"eth0", "eth10", "docker0", "enp6s0", "ib0"});
  const NicFilter f = filter({"^docker"});
  CHECK_FALSE(f.empty());
  CHECK_FALSE(f.has_inclusions());
  CHECK_FALSE(f.order(kHost[1]));  // exclusions give no order
}

TEST_CASE("subnet items, IPv4 and IPv6, match a NIC with an address inside", "[nic_filter]") {
  CHECK(passing(filter({"10.0.0.0/8"}), kHost) == Strings{"eth1", "eth10", "enp6s0", "ib0"});
  CHECK(passing(filter({"10.0.0.0/24"}), kHost) == Strings{"enp6s0"});
  CHECK(passing(filter({"fd77::/64"}), kHost) == Strings{"eth1"});
  CHECK(passing(filter({"fe80::/10"}), kHost) == Strings{"eth1"});  // "fe80::1%eth1": the scope is stripped
  CHECK(passing(filter({"^172.16.0.0/12"}), kHost) == Strings{"lo", "eth0", "eth1", "eth10", "enp6s0", "ib0"});
  CHECK(passing(filter({"^10.0.0.0/8,^=lo"}), kHost) == Strings{"eth0", "docker0"});
  // '=' changes nothing on a subnet, so an exact list may hold subnets.
  CHECK(passing(filter({"=ib0,10.0.0.0/24"}), kHost) == Strings{"enp6s0", "ib0"});
}

TEST_CASE("per-item marks add to the list's marks", "[nic_filter]") {
  // An inclusion first, then item-level exclusions and exact names.
  CHECK(passing(filter({"eth,^eth1"}), kHost) == Strings{"eth0"});  // ^eth1 is a prefix: eth10 goes too
  CHECK(passing(filter({"eth,^=eth1"}), kHost) == Strings{"eth0", "eth10"});
  CHECK(passing(filter({"e,=ib0,^=docker0,^lo"}), kHost) == Strings{"eth0", "eth1", "eth10", "enp6s0", "ib0"});
  // Marks never drop: after a leading '^', every item is an exclusion.
  CHECK(passing(filter({"^docker,eth"}), kHost) == Strings{"lo", "enp6s0", "ib0"});
  // ... so a mix that starts with an exclusion needs two flags.
  CHECK(passing(filter({"^docker", "e"}), kHost) == Strings{"eth0", "eth1", "eth10", "enp6s0"});
  // Exclusions win over inclusions.
  CHECK(passing(filter({"=eth1", "^=eth1"}), kHost).empty());
}

TEST_CASE("order() is the index of the first inclusion a NIC matches", "[nic_filter]") {
  const NicFilter f = filter({"=ib0,10.0.0.0/24", "eth1", "e"});
  CHECK(f.order(kHost[6]) == 0u);  // ib0
  CHECK(f.order(kHost[5]) == 1u);  // enp6s0 through its subnet, before the prefix "e"
  CHECK(f.order(kHost[2]) == 2u);  // eth1
  CHECK(f.order(kHost[3]) == 2u);  // eth10 matches the prefix eth1
  CHECK(f.order(kHost[1]) == 3u);  // eth0: only "e"
  CHECK_FALSE(f.order(kHost[4]));  // docker0
  CHECK_FALSE(f.order(kHost[0]));  // lo
  // Repeats are dropped, so the order stays that of first mention.
  CHECK(filter({"ib0,eth0,ib0"}).inclusions() == Strings{"ib0", "eth0"});
}

TEST_CASE("admits_address: subnet inclusions pick the addresses of their NIC", "[nic_filter]") {
  const InterfaceInfo& eth1 = kHost[2];
  const NicFilter v6 = filter({"fd77::/64"});
  CHECK(v6.admits_address(eth1, "fd77::a"));
  CHECK_FALSE(v6.admits_address(eth1, "10.77.0.10"));
  CHECK_FALSE(v6.admits_address(eth1, "fe80::1%eth1"));
  // Named as well: every address counts.
  const NicFilter both = filter({"fd77::/64,=eth1"});
  CHECK(both.admits_address(eth1, "10.77.0.10"));
  CHECK(filter({}).admits_address(eth1, "10.77.0.10"));
  CHECK(filter({"^docker"}).admits_address(eth1, "10.77.0.10"));
}

TEST_CASE("selects_any says whether some NIC of a host matches an inclusion", "[nic_filter]") {
  const std::vector<InterfaceInfo> host_b{nic("eth1"), nic("docker0"), nic("wlp5s0"), nic("eth9"), nic("lo")};
  CHECK_FALSE(filter({"enp6s0,enp5s0"}).selects_any(host_b));
  CHECK(filter({"enp6s0,eth1"}).selects_any(host_b));
  CHECK(filter({"^eth1"}).selects_any(host_b));
  CHECK_FALSE(filter({"10.99.0.0/16"}).selects_any(host_b));
}

TEST_CASE("values() and text() are canonical and round-trip", "[nic_filter]") {
  const auto round_trips = [](const NicFilter& f) {
    CHECK(NicFilter::parse(f.values()) == f);
    CHECK(NicFilter::parse(f.values()).values() == f.values());
  };
  const NicFilter a = filter({"=eth1,enp6s0"});
  CHECK(a.values() == Strings{"=eth1,=enp6s0"});
  CHECK(a.text() == "--network-interface =eth1,=enp6s0");
  round_trips(a);

  const NicFilter b = filter({"eth,^eth9", "10.0.0.9/24"});
  CHECK(b.values() == Strings{"eth,10.0.0.0/24,^eth9"});
  CHECK(b.text() == "--network-interface 'eth,10.0.0.0/24,^eth9'");  // quoted: '^' is special in zsh
  round_trips(b);

  // An exact item before a prefix cannot share a value with it (the prefix would turn exact).
  const NicFilter c = filter({"=ib0", "eth"});
  CHECK(c.values() == Strings{"=ib0", "eth"});
  CHECK(c.text() == "--network-interface =ib0 --network-interface eth");
  round_trips(c);

  // Exclusions sort so that they merge: plain '^' ones first, then '^='.
  const NicFilter d = filter({"^=docker0,lo", "^veth", "^172.17.0.0/16"});
  CHECK(d.values() == Strings{"^172.17.0.0/16,^veth,^=docker0,^=lo"});
  round_trips(d);

  const NicFilter e = filter({"=ib0,fd77::/64", "^eth"});
  CHECK(e.values() == Strings{"=ib0,fd77::/64", "^eth"});
  round_trips(e);
  CHECK(filter({"=eth1", "=eth1"}).values() == Strings{"=eth1"});
}

TEST_CASE("malformed items are usage errors naming the flag and the item", "[nic_filter]") {
  CHECK(usage_error({""}) == "--network-interface: '': empty value");
  CHECK(usage_error({"eth0,,eth1"}) ==
        "--network-interface: 'eth0,,eth1': empty item (two commas in a row, or one at either end)");
  CHECK(usage_error({"eth0,"}) ==
        "--network-interface: 'eth0,': empty item (two commas in a row, or one at either end)");
  CHECK(usage_error({",eth0"}) ==
        "--network-interface: ',eth0': empty item (two commas in a row, or one at either end)");
  CHECK(usage_error({"^"}) == "--network-interface: '^': a mark needs a name, prefix or subnet after it");
  CHECK(usage_error({"^="}) == "--network-interface: '^=': a mark needs a name, prefix or subnet after it");
  CHECK(usage_error({"eth,="}) == "--network-interface: '=': a mark needs a name, prefix or subnet after it");
  CHECK(usage_error({"=^eth9"}) == "--network-interface: '=^eth9': '^' must come before '='");
  CHECK(usage_error({"^^eth9"}) == "--network-interface: '^^eth9': '^' given twice");
  CHECK(usage_error({"==eth9"}) == "--network-interface: '==eth9': '=' given twice");
  CHECK(usage_error({"eth0", "10.0.0.0/33"}) ==
        "--network-interface: '10.0.0.0/33': prefix length 33 is out of range 0..32");
  CHECK(usage_error({"fd77::/129"}) == "--network-interface: 'fd77::/129': prefix length 129 is out of range 0..128");
  CHECK(usage_error({"eth,^10.0.0/24"}) ==
        "--network-interface: '^10.0.0/24': '10.0.0' is not an IPv4 or IPv6 address");
  CHECK(usage_error({"10.0.0.0/x"}) == "--network-interface: '10.0.0.0/x': prefix length 'x' is not a number");
  CHECK(usage_error({"10.0.0.1"}) ==
        "--network-interface: '10.0.0.1': an address needs a prefix length (10.0.0.1/32 for this address alone)");
  CHECK(usage_error({"fd77::1"}) ==
        "--network-interface: 'fd77::1': an address needs a prefix length (fd77::1/128 for this address alone)");
  CHECK(usage_error({"enp129s0f1np1xyz"}) ==
        "--network-interface: 'enp129s0f1np1xyz': longer than an interface name can be (15 characters)");
  CHECK(usage_error({"eth 0"}) == "--network-interface: 'eth 0': an interface name has no blanks");
  for (const auto& values : {Strings{""}, Strings{"a,,b"}, Strings{"^"}, Strings{"1.2.3.4/99"}}) {
    CHECK(usage_error(values).find('\n') == std::string::npos);
  }
}

#include "tests/support/nic_lab.hpp"

namespace hvrun::test {

InterfaceInfo make_nic(const std::string& name, std::vector<std::string> addresses, std::vector<int> prefix_lengths,
                       bool is_virtual, int speed_mbps) {
  InterfaceInfo n;
  n.name = name;
  n.addresses = std::move(addresses);
  n.prefix_lengths = std::move(prefix_lengths);
  n.up = n.running = true;
  n.loopback = name == "lo";
  n.is_virtual = !n.loopback && is_virtual;
  n.speed_mbps = n.loopback ? -1 : speed_mbps;
  return n;
}

std::string fabric_name(std::size_t host) {
  static const std::vector<std::string> kNames{"eth1", "enp6s0", "enp5s0", "ib0"};
  return kNames[host % kNames.size()];
}

std::vector<HostInventory> lab_hosts(std::size_t count) {
  std::vector<HostInventory> out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string name(1, static_cast<char>('a' + i));
    const std::string a = std::to_string(10 + i);
    const std::string fab = fabric_name(i);
    out.push_back({name,
                   "node-" + name,
                   {make_nic("lo", {"127.0.0.1", "::1"}, {8, 128}),
                    make_nic(fab, {"10.77.0." + a, "fd77::" + a, "fe80::4c:1:0:0:" + a + "%" + fab}, {24, 64, 64}),
                    make_nic("docker0", {"172.17.0.1", "fe80::42:0:0:0:" + a + "%docker0"}, {16, 64}, true, -1),
                    make_nic("wlp5s0", {"192.168.77." + a, "fe80::4c:2:0:0:" + a + "%wlp5s0"}, {24, 64}),
                    make_nic("eth9", {"10.88.0." + a, "fe80::4c:3:0:0:" + a + "%eth9"}, {24, 64})}});
  }
  return out;
}

std::vector<ProbeResult> lab_probe(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                   const ProbeOverride& override) {
  std::vector<ProbeResult> out;
  for (const ProbeTarget& t : targets) {
    for (std::size_t from = 0; from < hosts.size(); ++from) {
      if (from == t.host) continue;
      ProbeResult r{from, t.host, t.iface, t.address, ProbeOutcome::kOk, "", std::chrono::milliseconds(2), ""};
      if (t.iface == "docker0") {
        r.outcome = ProbeOutcome::kWrongHost;  // 172.17.0.1 is the prober's own docker0
        r.answered_as = hosts[from].hostname;
      } else if (t.iface == "wlp5s0") {
        r.outcome = ProbeOutcome::kUnreachable;
        r.elapsed = std::chrono::milliseconds(1);
      } else if (t.iface == "eth9") {
        r.outcome = ProbeOutcome::kTimeout;
        r.elapsed = kLabProbeTimeout + std::chrono::milliseconds(3);
      }
      if (override) {
        if (const auto o = override(from, t)) {
          r.outcome = *o;
          if (*o == ProbeOutcome::kTimeout) r.elapsed = kLabProbeTimeout + std::chrono::milliseconds(1);
        }
      }
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace hvrun::test

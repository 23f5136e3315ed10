#pragma once
// Test support: synthetic inventories and probe results modelling the lab's NIC traps (scripts/lab.sh)
// on hosts a, b, c, d: a fabric NIC named differently per host (eth1, enp6s0, enp5s0, ib0;
// 10.77.0.1I/24 and fd77::1I/64), docker0 172.17.0.1/16 on every host (a probe lands on the prober
// itself), wlp5s0 192.168.77.1I/24 that reaches nobody, eth9 10.88.0.1I/24 that drops everything.
// Every NIC but lo is a veth in the lab, so all are is_virtual.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/nic/nic_selector.hpp"

namespace hvrun::test {

inline constexpr std::chrono::milliseconds kLabProbeTimeout{1000};

InterfaceInfo make_nic(const std::string& name, std::vector<std::string> addresses, std::vector<int> prefix_lengths,
                       bool is_virtual = true, int speed_mbps = 10000);

// Hosts "a".."d" (first `count`), hostnames "node-a".. (as the agents' gethostname would say).
std::vector<HostInventory> lab_hosts(std::size_t count = 4);

// The fabric NIC's name on host i.
std::string fabric_name(std::size_t host);

// What `from` sees when probing `target`, unless `override` says otherwise (returns an outcome).
using ProbeOverride = std::function<std::optional<ProbeOutcome>(std::size_t from, const ProbeTarget& target)>;

// Every other host probes every target, as the lab's network would answer.
std::vector<ProbeResult> lab_probe(const std::vector<HostInventory>& hosts, const std::vector<ProbeTarget>& targets,
                                   const ProbeOverride& override = {});

// The names the tests of the synthetic trap lab use, declared once: such a test says
// `using namespace hvrun::test::trap_lab;`.
namespace trap_lab {
using hvrun::HostInventory;
using hvrun::NicFilter;
using hvrun::ProbeOutcome;
using hvrun::ProbeResult;
using hvrun::ProbeTarget;
using hvrun::test::fabric_name;
using hvrun::test::lab_hosts;
using hvrun::test::lab_probe;
using hvrun::test::make_nic;
}  // namespace trap_lab

}  // namespace hvrun::test

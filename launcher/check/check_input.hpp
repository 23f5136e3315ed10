#pragma once
// The facts a --check-only report is made of, as data: what SSH, the agents and select_nics() found per
// host, and the settings that pin other tools to the chosen NICs. The report (check_report.hpp) and its
// views (check_summary, check_matrix, check_html) read it; none of them gathers anything.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/interface_list.hpp"
#include "launcher/nic/ip_subnet.hpp"
#include "launcher/nic/link_speed.hpp"
#include "launcher/nic/nic_filter.hpp"
#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

struct HostCheck {
  std::string host;                       // as in -H
  std::optional<std::string> ssh_error;   // nullopt: SSH and the agent came up; else the one-line error
  std::string agent_version;              // "" when unknown
  std::vector<InterfaceInfo> interfaces;  // as the agent reported them; empty when SSH failed
  HostSelection selection;                // select_nics()'s entry for this host; empty when SSH failed
};

struct CheckInput {
  std::vector<HostCheck> hosts;              // in -H order
  std::chrono::milliseconds probe_time{0};   // how long probing took
  NicFilter filter;                          // the user's --network-interface
  bool single_host = false;
  // The link test's figures (empty when it did not run: --no-link-test, one host), and the hosts as
  // they name them (indexes as `hosts`).
  std::vector<LinkFigure> links;
  std::vector<LinkHost> link_hosts;
};

// The settings that pin other tools to the chosen NICs (only meaningful when every host has one).
struct ToolSettings {
  std::string network_interface;                                // hvrun flags: "--network-interface =eth1,=enp6s0"
  std::vector<std::pair<std::string, std::string>> nccl;        // per host: (host, "=eth1")
  std::optional<IpSubnet> shared_subnet;                        // Open MPI's btl/oob_tcp_if_include
};

}  // namespace hvrun

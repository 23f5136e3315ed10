#pragma once
// This host's network interfaces as the probe and the NIC choice see them.
#include <string>
#include <vector>

struct sockaddr;

namespace hvrun {

struct InterfaceInfo {
  std::string name;
  std::vector<std::string> addresses;  // IPv4 and IPv6 (link-local ones with "%name")
  std::vector<int> prefix_lengths;     // parallel to addresses: netmask bits; -1 when the kernel gave none
  bool up = false;
  bool running = false;
  bool loopback = false;
  bool is_virtual = false;  // no /sys/class/net/NAME/device: bridges, veths, docker0, tunnels
  int speed_mbps = -1;      // /sys/class/net/NAME/speed; -1 when the kernel does not know
  // The device this NIC is enslaved to (/sys/class/net/NAME/master: a bridge such as docker0, or a
  // bond); "" when none. A port of a bridge carries no address of its own: the bridge does.
  std::string master;
  bool operator==(const InterfaceInfo&) const = default;
};

// Interfaces in the kernel's order, each with all of its addresses; those without an IP address are
// left out. Throws SystemError when getifaddrs fails.
std::vector<InterfaceInfo> list_interfaces();

// Every IPv4 and IPv6 address of this host, written as list_interfaces writes them, from getifaddrs
// alone (none of the /sys reads list_interfaces makes per interface). Throws SystemError when
// getifaddrs fails.
std::vector<std::string> own_addresses();

// An IPv4 or IPv6 address as inet_ntop writes it, without brackets or scope ("10.0.0.1", "fe80::1");
// "" for any other family.
std::string address_text(const sockaddr* sa);


}  // namespace hvrun

#pragma once
// IPv4 and IPv6 subnets in CIDR notation, and the few address tests the NIC filter and the NIC choice
// need. Addresses are text as list_interfaces writes them; a "%scope" suffix is ignored everywhere.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hvrun {

class IpSubnet {
 public:
  // "10.0.0.0/24", "fd77::/64". The prefix length is decimal, 0..32 (IPv4) or 0..128 (IPv6). Host bits
  // are cleared, so "10.0.0.7/24" is 10.0.0.0/24. On failure returns nullopt and, if `why` is given,
  // sets it to a short reason ("prefix length 33 is out of range 0..32").
  static std::optional<IpSubnet> parse(std::string_view text, std::string* why = nullptr);

  // The subnet of `address` that is `prefix_length` bits long; nullopt when the address is not an IP
  // address or the length is out of range for its family.
  static std::optional<IpSubnet> of(std::string_view address, int prefix_length);

  // True when `address` is of this subnet's family and inside it.
  bool contains(std::string_view address) const;

  bool is_ipv6() const { return ipv6_; }
  int prefix_length() const { return prefix_; }
  std::string text() const;  // canonical: "10.0.0.0/24", "fd77::/64"

  bool operator==(const IpSubnet&) const = default;

 private:
  IpSubnet() = default;
  bool ipv6_ = false;
  int prefix_ = 0;
  std::array<std::uint8_t, 16> bytes_{};  // IPv4 uses the first 4
};

// An IP address (IPv4 or IPv6, "%scope" ignored) as opposed to anything else.
bool is_ip_address(std::string_view address);
bool is_ipv4_address(std::string_view address);
// fe80::/10: meaningful only together with an interface of the host that uses it.
bool is_ipv6_link_local(std::string_view address);

}  // namespace hvrun

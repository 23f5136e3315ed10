#include "launcher/nic/ip_subnet.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace hvrun {

namespace {

struct Address {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> bytes{};
};

std::optional<Address> parse_address(std::string_view text) {
  text = text.substr(0, text.find('%'));
  const std::string copy(text);  // inet_pton wants a NUL-terminated string
  Address a;
  if (::inet_pton(AF_INET, copy.c_str(), a.bytes.data()) == 1) return a;
  a.ipv6 = true;
  if (::inet_pton(AF_INET6, copy.c_str(), a.bytes.data()) == 1) return a;
  return std::nullopt;
}

int max_prefix(bool ipv6) { return ipv6 ? 128 : 32; }

// Clears every bit after the first `prefix` ones.
void mask(std::array<std::uint8_t, 16>& bytes, int prefix) {
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(prefix - 8 * i, 0, 8);
    bytes[static_cast<std::size_t>(i)] &= static_cast<std::uint8_t>(0xff00u >> keep);
  }
}

}  // namespace

std::optional<IpSubnet> IpSubnet::parse(std::string_view text, std::string* why) {
  const auto fail = [why](std::string reason) -> std::optional<IpSubnet> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return fail("not ADDRESS/PREFIX-LENGTH");
  const std::string_view addr = text.substr(0, slash);
  const std::string_view bits = text.substr(slash + 1);
  if (addr.find('%') != std::string_view::npos) return fail("a subnet has no %scope");
  const auto address = parse_address(addr);
  if (!address) return fail("'" + std::string(addr) + "' is not an IPv4 or IPv6 address");
  int prefix = -1;
  const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
  if (bits.empty() || ec != std::errc() || end != bits.data() + bits.size() || bits.front() == '-') {
    return fail("prefix length '" + std::string(bits) + "' is not a number");
  }
  const int limit = max_prefix(address->ipv6);
  if (prefix < 0 || prefix > limit) {
    return fail("prefix length " + std::string(bits) + " is out of range 0.." + std::to_string(limit));
  }
  return of(addr, prefix);  // valid by now: of() builds and masks it
}

std::optional<IpSubnet> IpSubnet::of(std::string_view address, int prefix_length) {
  const auto a = parse_address(address);
  if (!a || prefix_length < 0 || prefix_length > max_prefix(a->ipv6)) return std::nullopt;
  IpSubnet s;
  s.ipv6_ = a->ipv6;
  s.prefix_ = prefix_length;
  s.bytes_ = a->bytes;
  mask(s.bytes_, prefix_length);
  return s;
}

bool IpSubnet::contains(std::string_view address) const {
  auto a = parse_address(address);
  if (!a || a->ipv6 != ipv6_) return false;
  mask(a->bytes, prefix_);
  return a->bytes == bytes_;
}

std::string IpSubnet::text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(ipv6_ ? AF_INET6 : AF_INET, bytes_.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(prefix_);
}

bool is_ip_address(std::string_view address) { return parse_address(address).has_value(); }

bool is_ipv4_address(std::string_view address) {
  const auto a = parse_address(address);
  return a && !a->ipv6;
}

bool is_ipv6_link_local(std::string_view address) {
  const auto a = parse_address(address);
  return a && a->ipv6 && a->bytes[0] == 0xfe && (a->bytes[1] & 0xc0) == 0x80;
}

}  // namespace hvrun

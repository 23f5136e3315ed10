#pragma once
// What `--network-interface` lets hvrun consider. NCCL_SOCKET_IFNAME's syntax, plus subnets and
// per-item marks. Each occurrence of the flag is one value: a comma list of items.
//
//   eth            a name prefix: eth0, eth1, eth10, ...
//   =eth1          exactly the NIC named eth1
//   10.0.0.0/24    a subnet, IPv4 or IPv6 (fd77::/64): a NIC with an address inside it. Host bits are
//                  cleared (10.0.0.7/24 is 10.0.0.0/24); a bare address without /LENGTH is an error.
//   ^docker        an exclusion: ^prefix, ^=exact-name, ^subnet
//
// Marks at the start of a value apply to every item of that value, as in NCCL: `^docker0,lo` excludes
// both, `=eth1,ib0` takes exactly eth1 and exactly ib0, `^=docker0,lo` excludes exactly docker0 and lo.
// An item may add marks of its own: `eth,^eth9` takes eth* but not eth9*, `eth,=ib0` takes eth* and
// exactly ib0. Marks only add up, an item cannot drop its value's marks: in `^docker,eth` both items
// are exclusions. To mix, start the value with an inclusion or give the flag twice
// (`--network-interface ^docker --network-interface eth`). An item's own marks are `^` then `=`.
// `=` on a subnet changes nothing. Values of repeated flags are joined in order; repeats are dropped.
//
// A NIC passes when it matches no exclusion and, if there is any inclusion, at least one inclusion.
// Earlier inclusions are preferred (order()). The filter only narrows the candidates; they are still
// probed.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/interface_list.hpp"
#include "launcher/nic/ip_subnet.hpp"

namespace hvrun {

class NicFilter {
 public:
  NicFilter() = default;  // lets every NIC pass

  // One string per flag occurrence, as typed. A malformed item throws UsageError, one line:
  // "--network-interface: 'ITEM': WHY" (empty items, a lone mark, a bad subnet or prefix length, a bare
  // address, a name no interface can have).
  static NicFilter parse(const std::vector<std::string>& values);

  bool empty() const { return includes_.empty() && excludes_.empty(); }
  bool has_inclusions() const { return !includes_.empty(); }

  // Passes every exclusion and, when there are inclusions, matches at least one.
  bool allows(const InterfaceInfo& nic) const;

  // Index of the first inclusion `nic` matches (0 = the user's first choice); nullopt when none does.
  std::optional<std::size_t> order(const InterfaceInfo& nic) const;

  // Whether `address` of an allowed `nic` counts: when the NIC passes only through subnet inclusions,
  // only its addresses inside those subnets do (`fd77::/64` asks for IPv6); otherwise all of them.
  bool admits_address(const InterfaceInfo& nic, std::string_view address) const;

  // True when there are no inclusions or some NIC of `nics` matches one (a host's whole list).
  bool selects_any(const std::vector<InterfaceInfo>& nics) const;

  // Every inclusion as values() writes it ("eth", "=ib0", "10.0.0.0/24"), in order.
  std::vector<std::string> inclusions() const;

  // Canonical values, one per flag: inclusions in order, then exclusions, each item with all its marks,
  // as few values as the marking rule allows. parse(values()) == *this.
  std::vector<std::string> values() const;

  // The flags for a command line, shell-quoted where needed: "--network-interface =eth1,=enp6s0"
  // (several flags when one value cannot say it); "" for an empty filter.
  std::string text() const;

  bool operator==(const NicFilter&) const = default;

 private:
  enum class Kind { kPrefix, kExact, kSubnet };
  struct Item {
    Kind kind = Kind::kPrefix;
    bool exclude = false;
    std::string name;               // kPrefix, kExact
    std::optional<IpSubnet> subnet;  // kSubnet
    bool operator==(const Item&) const = default;
  };

  static bool matches(const Item& item, const InterfaceInfo& nic);
  static std::string item_text(const Item& item);
  void add(Item item);

  std::vector<Item> includes_;  // in the user's order
  std::vector<Item> excludes_;  // sorted canonically (their order means nothing)
};

}  // namespace hvrun

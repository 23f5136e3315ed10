// Fuzz target body: NicFilter::parse (launcher/nic/nic_filter.hpp). The input holds one --network-interface
// value per line ('\n' splits; an empty input is one empty value). Its documented failure is UsageError.
// Checked besides, on every filter it accepts:
//   - parse(values()) == filter (the header's promise), and text() is "" exactly for an empty filter;
//   - on synthetic NICs (fixed ones plus one named after each name inclusion): allows() only what
//     matches an inclusion when there are any; order() set for a NIC named after an inclusion;
//     selects_any() agrees with order(); the reparsed filter answers allows/order/admits_address the same.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/nic/nic_filter.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

namespace {

std::vector<std::string> split_lines(std::string_view input) {
  std::vector<std::string> values;
  for (std::size_t start = 0;;) {
    const auto newline = input.find('\n', start);
    values.emplace_back(input.substr(start, newline == std::string_view::npos ? newline : newline - start));
    if (newline == std::string_view::npos) return values;
    start = newline + 1;
  }
}

InterfaceInfo nic(std::string name, std::vector<std::string> addresses, bool loopback = false) {
  InterfaceInfo n;
  n.name = std::move(name);
  n.addresses = std::move(addresses);
  n.prefix_lengths.assign(n.addresses.size(), -1);
  n.up = n.running = true;
  n.loopback = loopback;
  return n;
}

std::vector<InterfaceInfo> fixed_nics() {
  return {
      nic("lo", {"127.0.0.1", "::1"}, true),
      nic("eth0", {"10.0.0.7", "fe80::1%eth0"}),
      nic("eth10", {"10.0.1.7"}),
      nic("docker0", {"172.17.0.1"}),
      nic("enp6s0", {"192.168.1.5", "fd77::5"}),
      nic("ib0", {}),
  };
}

// One NIC named after each name inclusion, so that matching is exercised whatever the input names.
std::vector<InterfaceInfo> named_after_inclusions(const NicFilter& f) {
  std::vector<InterfaceInfo> nics;
  for (std::string text : f.inclusions()) {
    if (text.find('/') != std::string::npos) continue;  // a subnet, not a name
    if (text.starts_with('=')) text.erase(0, 1);
    nics.push_back(nic(text, {"10.9.8.7"}));
  }
  return nics;
}

}  // namespace

void nic_filter(std::string_view input) {
  const std::vector<std::string> values = split_lines(input);
  NicFilter f;
  try {
    f = NicFilter::parse(values);
  } catch (const UsageError&) {
    return;
  }

  NicFilter again;
  try {
    again = NicFilter::parse(f.values());
  } catch (const UsageError& e) {
    expect(false, std::string("values() are refused by parse(): ") + e.what());
  }
  expect(again == f, "parse(values()) differs from the filter");
  expect(f.text().empty() == f.empty(), "text() is empty but the filter is not, or the other way round");

  const std::vector<InterfaceInfo> named = named_after_inclusions(f);
  std::vector<InterfaceInfo> nics = fixed_nics();
  nics.insert(nics.end(), named.begin(), named.end());
  bool any_ordered = false;
  for (const InterfaceInfo& n : nics) {
    const bool allowed = f.allows(n);
    const auto order = f.order(n);
    any_ordered = any_ordered || order.has_value();
    if (f.has_inclusions() && allowed) expect(order.has_value(), "NIC " + n.name + " allowed without an inclusion");
    if (order) expect(*order < f.inclusions().size(), "order() past the inclusions for NIC " + n.name);
    expect(again.allows(n) == allowed && again.order(n) == order, "the reparsed filter judges NIC " + n.name + " differently");
    for (const std::string& a : n.addresses) expect(again.admits_address(n, a) == f.admits_address(n, a),
                                                    "the reparsed filter admits " + a + " differently");
  }
  for (const InterfaceInfo& n : named)
    expect(f.order(n).has_value(), "NIC " + n.name + ", named after an inclusion, matches none");
  expect(f.selects_any(nics) == (!f.has_inclusions() || any_ordered), "selects_any() disagrees with order()");
}

}  // namespace hvrun::fuzz

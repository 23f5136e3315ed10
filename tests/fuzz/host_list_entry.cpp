// Fuzz target bodies: parse_host_list and parse_hostfile (launcher/cli/host_list.hpp). Their documented
// failure is UsageError. Checked besides, on what they accept:
//   - every host has a name free of blanks, control characters and the list's separators, and at
//     least one slot; no name appears twice (duplicates merge);
//   - the hosts written back as a -H value, and as a hostfile, parse to the same hosts (so -H and
//     --hostfile agree on every host either accepts).
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/host_list.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

namespace {

// A name as the user would write it in -H or a hostfile: IPv6 literals (anything with ':') in brackets.
std::string written(const HostSpec& h) {
  return h.name.find(':') == std::string::npos ? h.name : "[" + h.name + "]";
}

std::string as_host_list(const std::vector<HostSpec>& hosts) {
  std::string out;
  for (const HostSpec& h : hosts) out += (out.empty() ? "" : ",") + written(h) + ":" + std::to_string(h.slots);
  return out;
}

std::string as_hostfile(const std::vector<HostSpec>& hosts) {
  std::string out = "# written back by the fuzz target\n";
  for (const HostSpec& h : hosts) out += written(h) + " slots=" + std::to_string(h.slots) + "\n";
  return out;
}

void check_hosts(const std::vector<HostSpec>& hosts) {
  expect(!hosts.empty(), "an empty host list was accepted");
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const HostSpec& h = hosts[i];
    expect(!h.name.empty(), "a host without a name was accepted");
    expect(h.slots > 0, "host '" + h.name + "' has " + std::to_string(h.slots) + " slots");
    for (const char c : h.name) {
      const auto u = static_cast<unsigned char>(c);
      expect(u > ' ' && u != 0x7f, "host name '" + h.name + "' holds a blank or a control character");
      expect(std::string_view(",[]#=").find(c) == std::string_view::npos,
             "host name '" + h.name + "' holds '" + std::string(1, c) + "'");
    }
    for (std::size_t j = 0; j < i; ++j) expect(hosts[j].name != h.name, "host '" + h.name + "' listed twice");
  }
}

// Both ways of writing the hosts back must give them again; a UsageError here is a finding too.
void check_written_back(const std::vector<HostSpec>& hosts) {
  try {
    expect(parse_host_list(as_host_list(hosts)) == hosts, "-H written back parses differently");
    expect(parse_hostfile(as_hostfile(hosts), "written-back") == hosts, "hostfile written back parses differently");
  } catch (const UsageError& e) {
    expect(false, std::string("hosts written back are refused: ") + e.what());
  }
}

}  // namespace

void host_list(std::string_view input) {
  std::vector<HostSpec> hosts;
  try {
    hosts = parse_host_list(input);
  } catch (const UsageError&) {
    return;
  }
  check_hosts(hosts);
  check_written_back(hosts);
}

void hostfile(std::string_view input) {
  std::vector<HostSpec> hosts;
  try {
    hosts = parse_hostfile(input, "fuzz.hosts");
  } catch (const UsageError&) {
    return;
  }
  check_hosts(hosts);
  check_written_back(hosts);
}

}  // namespace hvrun::fuzz

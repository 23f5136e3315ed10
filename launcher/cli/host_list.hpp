#pragma once
// Host lists as users write them: `-H a:4,b:4` and hostfiles (`host slots=N`).
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

struct HostSpec {
  std::string name;  // as the user wrote it (an ~/.ssh/config alias, a DNS name or an address)
  int slots = 1;
  bool operator==(const HostSpec&) const = default;
};

// Parses `-H` values: comma-separated `host[:slots]`; slots default to 1 and must be a positive integer.
// IPv6 literals are written in brackets: `[fe80::1]:2`. Duplicate names are merged into the first
// occurrence with their slots summed (as mpirun counts `-H a,a` as two slots on a).
// Throws UsageError naming the bad item and the flag ("-H: 'a:0': slots must be a positive integer").
std::vector<HostSpec> parse_host_list(std::string_view text);

// Parses a hostfile's contents: one `host [slots=N]` per line (`host:N` also accepted), `#` comments,
// blank lines ignored. Duplicates merge as in parse_host_list. `origin` (the path) prefixes errors,
// with the line number: "hosts.txt:3: 'a slots=x': ...".
std::vector<HostSpec> parse_hostfile(std::string_view contents, const std::string& origin);

// Reads and parses a hostfile; an unreadable file is a UsageError naming the path and strerror.
std::vector<HostSpec> read_hostfile(const std::string& path);

}  // namespace hvrun

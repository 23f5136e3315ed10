#include "launcher/cli/host_list.hpp"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <optional>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "common/error.hpp"

namespace hvrun {

namespace {

constexpr std::string_view kSpace = " \t\r\n\f\v";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

// Where an error came from: "-H" or "hosts.txt:3". Every message is "<where>: '<item>': <why>".
[[noreturn]] void fail(const std::string& where, std::string_view item, const std::string& why) {
  throw UsageError(where + ": '" + std::string(item) + "': " + why);
}

// Slots as users write them: decimal digits only (no sign, no spaces), 1..INT_MAX.
int parse_slots(const std::string& where, std::string_view item, std::string_view digits) {
  int value = 0;
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (!digits.empty() && digits.front() != '-' && ec == std::errc::result_out_of_range && ptr == end) {
    fail(where, item, "slots out of range");
  }
  if (digits.empty() || digits.front() == '-' || ec != std::errc() || ptr != end || value <= 0) {
    fail(where, item, "slots must be a positive integer");
  }
  return value;
}

void check_name(const std::string& where, std::string_view item, std::string_view name) {
  if (name.empty()) fail(where, item, "missing host name");
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7f) fail(where, item, "host name contains whitespace or a control character");
    if (c == '[' || c == ']') fail(where, item, "brackets belong around a whole IPv6 address: [fe80::1]:2");
    if (c == ',' || c == '=' || c == '#') fail(where, item, std::string("host name contains '") + c + "'");
  }
}

// One `host[:slots]` or `[v6addr][:slots]` item. `slots` is empty when the item names none.
struct HostItem {
  std::string name;
  std::optional<int> slots;
};

HostItem parse_item(const std::string& where, std::string_view item) {
  HostItem out;
  std::string_view name;
  std::optional<std::string_view> slots_text;
  if (!item.empty() && item.front() == '[') {
    const auto close = item.find(']');
    if (close == std::string_view::npos) fail(where, item, "missing ']' after the IPv6 address");
    name = item.substr(1, close - 1);
    const auto after = item.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail(where, item, "expected ':slots' after ']'");
      slots_text = after.substr(1);
    }
    // The brackets only let ':' into the name; every other rule of a host name still holds (no control
    // character inside them either).
    check_name(where, item, name);
  } else {
    const auto colon = item.find(':');
    name = item.substr(0, colon);
    if (colon != std::string_view::npos) {
      slots_text = item.substr(colon + 1);
      if (slots_text->find(':') != std::string_view::npos) {
        fail(where, item, "more than one ':' (write IPv6 addresses in brackets: [fe80::1]:2)");
      }
    }
    check_name(where, item, name);
  }
  out.name = std::string(name);
  if (slots_text) out.slots = parse_slots(where, item, *slots_text);
  return out;
}

// Merges duplicates into the first occurrence, summing slots; the sum must stay an int.
void add_host(std::vector<HostSpec>& hosts, HostSpec spec, const std::string& where, std::string_view item) {
  for (auto& h : hosts) {
    if (h.name != spec.name) continue;
    if (h.slots > INT_MAX - spec.slots) fail(where, item, "total slots for this host out of range");
    h.slots += spec.slots;
    return;
  }
  hosts.push_back(std::move(spec));
}

// Removes spaces next to '=' so that `slots = 4` reads as `slots=4`.
std::string glue_equals(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (kSpace.find(c) != std::string_view::npos) {
      auto next = line.find_first_not_of(kSpace, i);
      if (next == std::string_view::npos) break;
      if (line[next] == '=' || (!out.empty() && out.back() == '=')) {
        i = next - 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

HostSpec parse_hostfile_line(std::string_view line, const std::string& where) {
  const std::string glued = glue_equals(line);
  std::istringstream words(glued);
  std::string first;
  words >> first;
  HostItem item = parse_item(where, first);
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) fail(where, line, "unexpected '" + word + "' (expected slots=N)");
    const std::string key = word.substr(0, eq);
    if (key != "slots") fail(where, line, "unknown key '" + key + "' (only slots=N is understood)");
    if (item.slots) fail(where, line, "slots given twice");
    item.slots = parse_slots(where, line, std::string_view(word).substr(eq + 1));
  }
  return HostSpec{std::move(item.name), item.slots.value_or(1)};
}

}  // namespace

std::vector<HostSpec> parse_host_list(std::string_view text) {
  const std::string where = "-H";
  std::vector<HostSpec> hosts;
  if (trim(text).empty()) throw UsageError("-H: empty host list (expected host[:slots],...)");
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    const auto raw = text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    const auto item = trim(raw);
    if (item.empty()) {
      throw UsageError("-H: '" + std::string(text) + "': empty item in the host list");
    }
    const HostItem parsed = parse_item(where, item);
    add_host(hosts, HostSpec{parsed.name, parsed.slots.value_or(1)}, where, item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hosts;
}

std::vector<HostSpec> parse_hostfile(std::string_view contents, const std::string& origin) {
  std::vector<HostSpec> hosts;
  int line_number = 0;
  std::size_t start = 0;
  while (start < contents.size()) {
    const auto newline = contents.find('\n', start);
    auto line = contents.substr(start, newline == std::string_view::npos ? newline : newline - start);
    start = newline == std::string_view::npos ? contents.size() : newline + 1;
    ++line_number;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::string where = origin + ":" + std::to_string(line_number);
    add_host(hosts, parse_hostfile_line(line, where), where, line);
  }
  if (hosts.empty()) throw UsageError(origin + ": no hosts in the hostfile (expected lines of 'host slots=N')");
  return hosts;
}

std::vector<HostSpec> read_hostfile(const std::string& path) {
  const auto unreadable = [&path](int err) {
    return UsageError("--hostfile: '" + path + "': " + std::strerror(err));
  };
  const int fd = retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (fd < 0) throw unreadable(errno);
  std::string contents;
  char buffer[4096];
  for (;;) {
    const ssize_t n = retry_eintr([&] { return ::read(fd, buffer, sizeof buffer); });
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw unreadable(err);  // EISDIR for a directory
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return parse_hostfile(contents, path);
}

}  // namespace hvrun

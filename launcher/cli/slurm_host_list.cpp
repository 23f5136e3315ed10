#include "launcher/cli/slurm_host_list.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <unordered_set>

#include "common/error.hpp"

namespace hvrun {

namespace {

constexpr std::string_view kBlank = " \t\r\n\f\v";
// Bounds in brackets: at most this many digits, so every value and its padding fit a uint64.
constexpr std::size_t kMaxDigits = 18;

[[noreturn]] void fail(const std::string& where, std::string_view list, const std::string& why) {
  throw UsageError(where + ": '" + std::string(list) + "': " + why);
}

bool is_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// A decimal number of at most kMaxDigits digits; `what` names it in the error.
std::uint64_t number(std::string_view digits, const std::string& where, std::string_view list, const char* what) {
  if (!is_digits(digits)) fail(where, list, std::string(what) + " '" + std::string(digits) + "' is not a number");
  if (digits.size() > kMaxDigits) fail(where, list, std::string(what) + " '" + std::string(digits) + "' is too long");
  std::uint64_t v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return v;
}

std::string padded(std::uint64_t v, std::size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// The values of one bracket group's contents, as text: "1-3,7" → 1 2 3 7.
std::vector<std::string> expand_group(std::string_view body, const std::string& where, std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const auto comma = body.find(',', start);
    const std::string_view range = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
    if (range.empty()) fail(where, list, "empty range in brackets");
    const auto dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::uint64_t lo = number(lo_text, where, list, "range bound");
    const std::uint64_t hi =
        dash == std::string_view::npos ? lo : number(range.substr(dash + 1), where, list, "range bound");
    if (hi < lo) fail(where, list, "range " + std::string(range) + " runs backwards");
    if (hi - lo >= kMaxSlurmListSize || out.size() + (hi - lo) >= kMaxSlurmListSize)
      fail(where, list, "more than " + std::to_string(kMaxSlurmListSize) + " names");
    for (std::uint64_t v = lo; v <= hi; ++v) out.push_back(padded(v, lo_text.size()));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One item: literal text and bracket groups; every combination, the first group slowest.
void expand_item(std::string_view item, const std::string& where, std::string_view list,
                 std::vector<std::string>& out) {
  std::vector<std::string> names{""};
  std::size_t pos = 0;
  while (pos < item.size()) {
    const auto open = item.find_first_of("[]", pos);
    if (open == std::string_view::npos) {
      if (names.size() > 1 || pos > 0) fail(where, list, "text after the last ']' in '" + std::string(item) + "'");
      names[0] = std::string(item);
      break;
    }
    if (item[open] == ']') fail(where, list, "']' without '['");
    const auto close = item.find_first_of("[]", open + 1);
    if (close == std::string_view::npos || item[close] == '[') fail(where, list, "'[' without its ']'");
    const std::string literal(item.substr(pos, open - pos));
    const auto values = expand_group(item.substr(open + 1, close - open - 1), where, list);
    if (names.size() * values.size() + out.size() > kMaxSlurmListSize)
      fail(where, list, "more than " + std::to_string(kMaxSlurmListSize) + " names");
    std::vector<std::string> next;
    next.reserve(names.size() * values.size());
    for (const auto& n : names)
      for (const auto& v : values) next.push_back(n + literal + v);
    names = std::move(next);
    pos = close + 1;
  }
  for (auto& n : names) {
    for (const char c : n)
      if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) fail(where, list, "a name holds a control character");
    out.push_back(std::move(n));
  }
}

}  // namespace

std::vector<std::string> expand_slurm_host_list(std::string_view list, const std::string& where) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < list.size()) {
    if (list[pos] == ',' || kBlank.find(list[pos]) != std::string_view::npos) {
      ++pos;
      continue;
    }
    // An item ends at a comma or blank outside brackets.
    std::size_t end = pos;
    int depth = 0;
    for (; end < list.size(); ++end) {
      const char c = list[end];
      if (c == '[') ++depth;
      if (c == ']') --depth;
      if (depth == 0 && (c == ',' || kBlank.find(c) != std::string_view::npos)) break;
      if (depth > 1) fail(where, list, "brackets inside brackets");
      if (depth == 1 && kBlank.find(c) != std::string_view::npos) fail(where, list, "a blank inside brackets");
    }
    expand_item(list.substr(pos, end - pos), where, list, out);
    pos = end;
  }
  if (out.empty()) fail(where, list, "no host names");
  std::unordered_set<std::string_view> seen;
  seen.reserve(out.size());
  for (const auto& n : out)
    if (!seen.insert(n).second) fail(where, list, "node '" + n + "' is listed twice");
  return out;
}

std::vector<int> expand_slurm_counts(std::string_view list, const std::string& where) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    const std::string_view item = list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
    std::string_view count_text = item;
    std::uint64_t repeat = 1;
    if (const auto paren = item.find('('); paren != std::string_view::npos) {
      if (!item.ends_with(')') || item.substr(paren + 1, 1) != "x")
        fail(where, list, "'" + std::string(item) + "' is not N or N(xM)");
      count_text = item.substr(0, paren);
      repeat = number(item.substr(paren + 2, item.size() - paren - 3), where, list, "repeat count");
    }
    const std::uint64_t count = number(count_text, where, list, "count");
    if (count == 0 || repeat == 0) fail(where, list, "'" + std::string(item) + "': counts must be positive");
    if (count > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      fail(where, list, "count " + std::string(count_text) + " is too large");
    if (repeat > kMaxSlurmListSize - out.size())
      fail(where, list, "more than " + std::to_string(kMaxSlurmListSize) + " counts");
    out.insert(out.end(), static_cast<std::size_t>(repeat), static_cast<int>(count));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace hvrun

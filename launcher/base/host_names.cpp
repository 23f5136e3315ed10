#include "launcher/base/host_names.hpp"

#include <algorithm>
#include <map>
#include <optional>

namespace hvrun {

namespace {

struct Numbered {
  std::string prefix;  // everything before the trailing digits
  std::string digits;  // the trailing digits, "" when none
};

Numbered split_number(const std::string& name) {
  std::size_t i = name.size();
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
  return {name.substr(0, i), name.substr(i)};
}

// "3-7,9" for numbers in first-seen order, runs of consecutive values joined.
std::string ranges(std::vector<std::string> digits) {
  std::sort(digits.begin(), digits.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  const auto value = [](const std::string& d) { return d.size() > 18 ? 0ULL : std::stoull(d); };
  std::string out;
  for (std::size_t i = 0; i < digits.size();) {
    std::size_t j = i;
    // Consecutive values run on; across a change of length only without zero padding (9, 10 run on;
    // 09, 100 do not).
    const auto runs_on = [&](const std::string& a, const std::string& b) {
      if (a.size() > 18 || b.size() > 18 || value(b) != value(a) + 1) return false;
      return a.size() == b.size() || (a.front() != '0' && b.front() != '0');
    };
    while (j + 1 < digits.size() && runs_on(digits[j], digits[j + 1])) ++j;
    out += (out.empty() ? "" : ",") + digits[i] + (j > i ? "-" + digits[j] : "");
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string fold_names(const std::vector<std::string>& names) {
  std::vector<std::string> order;                             // prefixes (or plain names) as first seen
  std::map<std::string, std::vector<std::string>> by_prefix;  // prefix -> trailing numbers
  for (const auto& n : names) {
    const Numbered s = split_number(n);
    const std::string key = s.digits.empty() ? "\n" + n : s.prefix;  // plain names never fold
    if (!by_prefix.count(key)) order.push_back(key);
    if (!s.digits.empty())
      by_prefix[key].push_back(s.digits);
    else
      by_prefix[key];
  }
  std::string out;
  for (const auto& key : order) {
    std::string item;
    const auto& numbers = by_prefix[key];
    if (key.starts_with("\n")) {
      item = key.substr(1);
    } else if (numbers.size() == 1) {
      item = key + numbers.front();
    } else {
      item = key + "[" + ranges(numbers) + "]";
    }
    out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

std::vector<std::vector<std::size_t>> name_groups(const std::vector<std::string>& names, std::size_t max_groups) {
  max_groups = std::max<std::size_t>(max_groups, 1);
  if (names.size() <= max_groups) {
    std::vector<std::vector<std::size_t>> out;
    for (std::size_t i = 0; i < names.size(); ++i) out.push_back({i});
    return out;
  }
  std::size_t longest = 0;
  for (const auto& n : names) longest = std::max(longest, split_number(n).digits.size());
  for (std::size_t drop = 1; drop <= longest; ++drop) {
    std::vector<std::string> keys;
    std::map<std::string, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const Numbered s = split_number(names[i]);
      const std::string key = s.prefix + "#" + s.digits.substr(0, s.digits.size() - std::min(drop, s.digits.size()));
      if (!groups.count(key)) keys.push_back(key);
      groups[key].push_back(i);
    }
    if (keys.size() <= max_groups && keys.size() > 1) {
      std::vector<std::vector<std::size_t>> out;
      for (const auto& k : keys) out.push_back(groups[k]);
      return out;
    }
  }
  const std::size_t per = (names.size() + max_groups - 1) / max_groups;
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i % per == 0) out.emplace_back();
    out.back().push_back(i);
  }
  return out;
}

}  // namespace hvrun

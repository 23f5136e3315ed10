#include "launcher/job/stack_groups.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/crash_report.hpp"
#include "common/log.hpp"
#include "launcher/job/rank_exits.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kSummaryFrames = 4;
constexpr std::size_t kMaxHostsNamed = 4;

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `  File "/x/train.py", line 19 in wait_for_shard` → "wait_for_shard at train.py:19".
std::string python_frame(const std::string& line) {
  const auto q1 = line.find('"');
  const auto q2 = line.find('"', q1 + 1);
  const auto at_line = line.find(", line ", q2);
  const auto in = line.find(" in ", at_line);
  if (q1 == std::string::npos || q2 == std::string::npos || at_line == std::string::npos || in == std::string::npos)
    return line;
  const std::string number = line.substr(at_line + 7, in - at_line - 7);
  return line.substr(in + 4) + " at " + base_name(line.substr(q1 + 1, q2 - q1 - 1)) + ":" + number;
}

// `  #0 0xADDR name+0xOFF (file)` → "name" (demangled), or "?? in libfoo.so".
std::string native_frame(const std::string& line) {
  const std::string plain = demangle_frame(line);
  std::istringstream words(plain);
  std::string index, addr, name;
  words >> index >> addr >> name;
  if (name == "??") {
    const auto open = plain.rfind('(');
    const auto close = plain.rfind(')');
    if (open != std::string::npos && close != std::string::npos && close > open)
      return "?? in " + base_name(plain.substr(open + 1, close - open - 1));
    return "??";
  }
  // A demangled name holds spaces and parentheses: it runs from after the address to the last '+'.
  const auto start = plain.find(addr) + addr.size() + 1;
  const auto plus = plain.rfind('+');
  if (plus == std::string::npos || plus <= start) return name;
  return plain.substr(start, plus - start);
}

}  // namespace

StackPlace stack_place(const std::string& text) {
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    bool first_header = true;
    for (std::string line; std::getline(in, line);) {
      if (starts_with(line, crash_report::kStackHeader)) {
        if (!first_header) break;  // the group's other processes: the leader tells where the rank is
        first_header = false;
      }
      lines.push_back(line);
    }
  }
  StackPlace python, native, kernel;
  enum { kNone, kPython, kNative } section = kNone;
  bool in_current = false;
  for (const std::string& line : lines) {
    if (line == crash_report::kPythonSection) {
      section = kPython;
      continue;
    }
    if (line == crash_report::kNativeSection) {
      section = kNative;
      continue;
    }
    if (section == kPython) {
      if (starts_with(line, "Current thread ")) {
        in_current = true;
        continue;
      }
      if (starts_with(line, "Thread ")) in_current = false;
      if (in_current && starts_with(line, "  File ")) {
        python.frames.push_back(python_frame(line));
        python.lines.push_back(line);
      }
    } else if (section == kNative) {
      if (starts_with(line, "  #")) {
        native.frames.push_back(native_frame(line));
        native.lines.push_back(demangle_frame(line));
      }
    } else if (starts_with(line, "  state ") || starts_with(line, "  kernel: ")) {
      kernel.lines.push_back(line);
      if (starts_with(line, "  kernel: ")) kernel.frames.push_back(line.substr(2));
      else if (const auto w = line.find("waiting in "); w != std::string::npos)
        kernel.frames.insert(kernel.frames.begin(), "kernel wait " + line.substr(w + 11));
    }
  }
  if (!python.frames.empty()) return python;
  if (!native.frames.empty()) return native;
  if (kernel.frames.empty() && !lines.empty()) kernel.frames.push_back(lines.front().substr(0, 200));
  return kernel;
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      for (std::size_t k = i; k <= j; ++k) out += (k > i ? "," : "") + std::to_string(ranks[k]);
    }
    i = j + 1;
  }
  return out;
}

std::string stack_groups_report(const std::vector<RankStackText>& stacks, std::size_t max_groups, std::size_t max_lines) {
  struct Group {
    std::vector<int> ranks;
    std::vector<std::string> hosts;
    StackPlace place;
  };
  std::map<std::vector<std::string>, std::size_t> index;
  std::vector<Group> groups;
  for (const RankStackText& s : stacks) {
    StackPlace place = stack_place(s.text);
    const auto [it, fresh] = index.emplace(place.frames, groups.size());
    if (fresh) groups.push_back(Group{{}, {}, std::move(place)});
    Group& g = groups[it->second];
    g.ranks.push_back(s.rank);
    if (std::find(g.hosts.begin(), g.hosts.end(), s.host) == g.hosts.end()) g.hosts.push_back(s.host);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
    return *std::min_element(a.ranks.begin(), a.ranks.end()) < *std::min_element(b.ranks.begin(), b.ranks.end());
  });
  const std::string prefix(kHvrunLogPrefix);
  std::string text;
  for (std::size_t gi = 0; gi < groups.size() && gi < max_groups; ++gi) {
    const Group& g = groups[gi];
    if (!text.empty()) text += "\n";
    text += prefix + (g.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(g.ranks) + " on ";
    for (std::size_t h = 0; h < g.hosts.size() && h < kMaxHostsNamed; ++h) text += (h > 0 ? ", " : "") + g.hosts[h];
    if (g.hosts.size() > kMaxHostsNamed) text += " and " + std::to_string(g.hosts.size() - kMaxHostsNamed) + " more hosts";
    text += ": ";
    if (g.place.frames.empty()) {
      text += "no stack";
    } else {
      text += "in ";
      for (std::size_t f = 0; f < g.place.frames.size() && f < kSummaryFrames; ++f)
        text += (f > 0 ? " \u2190 " : "") + g.place.frames[f];
      if (g.place.frames.size() > kSummaryFrames) text += " \u2190 ...";
    }
    for (std::size_t l = 0; l < g.place.lines.size() && l < max_lines; ++l) text += "\n" + prefix + "    " + g.place.lines[l];
    if (g.place.lines.size() > max_lines)
      text += "\n" + prefix + "    ... " + std::to_string(g.place.lines.size() - max_lines) + " more frames";
  }
  if (groups.size() > max_groups)
    text += "\n" + prefix + "... and " + std::to_string(groups.size() - max_groups) + " more groups of ranks";
  return text;
}

}  // namespace hvrun

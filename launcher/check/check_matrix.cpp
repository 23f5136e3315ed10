#include "launcher/check/check_matrix.hpp"

#include <algorithm>

#include "launcher/base/host_names.hpp"
#include "launcher/base/text_layout.hpp"
#include "launcher/check/check_summary.hpp"
#include "launcher/nic/verdict_groups.hpp"

namespace hvrun {

namespace {

// Hosts get one column each up to this many; beyond, name groups do.
constexpr std::size_t kMaxColumns = 64;

const char* colour_of(char c) {
  switch (c) {
    case '.':
      return "\x1b[32m";  // green
    case 'w':
    case 'a':
      return "\x1b[33m";  // yellow: something answered, the wrong thing
    case 't':
    case 'r':
    case 'u':
      return "\x1b[1;31m";  // bold red
    default:
      return "\x1b[2m";  // dim: diagonal, not probed, no NIC
  }
}

}  // namespace

std::vector<std::vector<ReachCell>> reach_cells(const CheckInput& in, const NicPick& pick) {
  const std::size_t n = in.hosts.size();
  std::vector<const NicVerdict*> nics(n, nullptr);
  for (std::size_t i = 0; i < n; ++i)
    if (!in.hosts[i].ssh_error) nics[i] = pick(in.hosts[i]);
  std::vector<std::vector<ReachCell>> cells(n, std::vector<ReachCell>(n));
  for (std::size_t to = 0; to < n; ++to) {
    const auto views = nics[to] != nullptr ? views_by_host(in, *nics[to]) : std::vector<const PeerView*>(n, nullptr);
    for (std::size_t from = 0; from < n; ++from) {
      ReachCell& c = cells[from][to];
      c.nic = nics[to];
      if (from == to) {
        c.kind = ReachCell::Kind::kSelf;
        continue;
      }
      if (nics[to] == nullptr || in.hosts[from].ssh_error) continue;  // kNoNic
      c.view = views[from];
      c.kind = c.view != nullptr && c.view->outcome ? ReachCell::Kind::kProbed : ReachCell::Kind::kNotProbed;
      if (c.kind == ReachCell::Kind::kProbed) c.outcome = *c.view->outcome;
    }
  }
  return cells;
}

int cell_badness(const ReachCell& c) {
  switch (c.kind) {
    case ReachCell::Kind::kSelf:
      return -1;
    case ReachCell::Kind::kNoNic:
      return 1;
    case ReachCell::Kind::kNotProbed:
      return 2;
    case ReachCell::Kind::kProbed:
      return c.outcome == ProbeOutcome::kOk ? 0 : 3;
  }
  return 0;
}

char cell_char(const ReachCell& cell) {
  switch (cell.kind) {
    case ReachCell::Kind::kSelf:
      return '\\';
    case ReachCell::Kind::kNoNic:
      return ' ';
    case ReachCell::Kind::kNotProbed:
      return '?';
    case ReachCell::Kind::kProbed:
      return outcome_char(cell.outcome);
  }
  return '?';
}

std::string matrix_text(const CheckInput& in, bool colour, std::size_t width) {
  const auto cells = reach_cells(in, [](const HostCheck& h) { return shown_nic(h); });
  std::vector<std::string> names;
  for (const HostCheck& h : in.hosts) names.push_back(h.host);
  std::size_t longest = 0;
  for (const auto& n : names) longest = std::max(longest, n.size());
  // One column per host when they and their labels fit; else hosts fold into groups, and labels (group
  // names) get up to a third of the width.
  const std::size_t label_cap = std::max<std::size_t>(width / 3, 12);
  const bool fits = names.size() <= kMaxColumns && names.size() + std::min(longest + 5, label_cap) + 1 <= width;
  const std::size_t label_room = fits ? std::min(longest + 5, label_cap) : label_cap;
  const std::size_t columns =
      fits ? names.size() : std::min(kMaxColumns, width > label_room + 1 ? width - label_room - 1 : 1);
  const auto groups = name_groups(names, columns);
  const bool folded = groups.size() < names.size();
  std::vector<std::string> labels;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::string> members;
    for (std::size_t i : groups[g]) members.push_back(names[i]);
    std::string label = std::to_string(g) + " " + fold_names(members);
    if (label.size() > label_room - 1) label = label.substr(0, label_room - 2) + "~";
    labels.push_back(label);
  }
  std::size_t label_w = 0;
  for (const auto& l : labels) label_w = std::max(label_w, l.size());

  std::string out = "who reaches whom: row probes column, over each host's chosen NIC (the best one where none" +
                    std::string(folded ? "; hosts folded into groups, a cell shows its worst pair" : "") + ")\n";
  out = wrap_line(out.substr(0, out.size() - 1), width);
  // Column numbers: tens on one line (when needed), units on the next.
  std::string tens(label_w + 1, ' '), units(label_w + 1, ' ');
  for (std::size_t g = 0; g < groups.size(); ++g) {
    tens += g >= 10 && g % 10 == 0 ? static_cast<char>('0' + (g / 10) % 10) : ' ';
    units += static_cast<char>('0' + g % 10);
  }
  if (groups.size() > 10) out += tens + "\n";
  out += units + "\n";
  for (std::size_t r = 0; r < groups.size(); ++r) {
    std::string line = pad_right(labels[r], label_w) + " ";
    char last = 0;
    for (std::size_t c = 0; c < groups.size(); ++c) {
      const ReachCell* worst = nullptr;
      for (std::size_t from : groups[r])
        for (std::size_t to : groups[c])
          if (worst == nullptr || cell_badness(cells[from][to]) > cell_badness(*worst)) worst = &cells[from][to];
      const char ch = worst == nullptr ? ' ' : cell_char(*worst);
      if (colour && ch != last) line += colour_of(ch);
      last = ch;
      line += ch;
    }
    if (colour) line += "\x1b[0m";
    out += line + "\n";
  }
  out += wrap_line(
      "legend: . ok  t timeout  r refused  u unreachable  w wrong-host  a auth-failed  ? not probed  "
      "blank: no NIC or ssh failed",
      width);
  for (const OneWayPair& p : one_way_pairs(in)) {
    out += wrap_line("one-way: " + in.hosts[p.from].host + " -> " + in.hosts[p.to].host + " " + to_string(p.outcome) +
                         ", " + in.hosts[p.to].host + " -> " + in.hosts[p.from].host + " ok",
                     width);
  }
  return out;
}

}  // namespace hvrun

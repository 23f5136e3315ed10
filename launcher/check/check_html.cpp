#include "launcher/check/check_html.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "common/checked_directory.hpp"
#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/invariant.hpp"
#include "common/unique_fd.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/check/check_matrix.hpp"
#include "launcher/check/check_summary.hpp"
#include "launcher/nic/verdict_groups.hpp"

namespace hvrun {

namespace {

// Beyond this many hosts, a page's matrix folds hosts into name groups too (a page holds more than a
// terminal, but a quarter million cells are no picture).
constexpr std::size_t kMaxPageColumns = 128;

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 16px; color: #222; }
pre { background: #f6f6f6; padding: 8px; font-size: 13px; }
table.matrix { border-collapse: collapse; margin: 8px 0 24px 0; font-family: monospace; font-size: 12px; }
table.matrix td, table.matrix th { width: 16px; height: 16px; padding: 0; text-align: center; }
table.matrix th.row { width: auto; text-align: right; padding-right: 6px; font-weight: normal; white-space: nowrap; }
table.matrix td { border: 1px solid #fff; }
td.ok { background: #2e9e44; color: #fff; }
td.fail { background: #d7261e; color: #fff; font-weight: bold; }
td.wrong { background: #e8b100; color: #000; }
td.unknown { background: #bbbbbb; }
td.none { background: #f0f0f0; }
td.self { background: #555555; }
td:hover { outline: 2px solid #000; }
.legend span { display: inline-block; width: 14px; height: 14px; vertical-align: middle; margin: 0 4px 0 12px; }
)";

const char* css_class(const ReachCell& c) {
  switch (c.kind) {
    case ReachCell::Kind::kSelf:
      return "self";
    case ReachCell::Kind::kNoNic:
      return "none";
    case ReachCell::Kind::kNotProbed:
      return "unknown";
    case ReachCell::Kind::kProbed:
      if (c.outcome == ProbeOutcome::kOk) return "ok";
      return c.outcome == ProbeOutcome::kWrongHost || c.outcome == ProbeOutcome::kAuthFailed ? "wrong" : "fail";
  }
  return "none";
}

// The hover text of one cell: "hvchk-h6 -> hvchk-h5 eth1 10.77.0.15: timeout after 1.0 s".
std::string verdict_of(const CheckInput& in, std::size_t from, std::size_t to, const ReachCell& c) {
  const std::string& a = in.hosts[from].host;
  const std::string& b = in.hosts[to].host;
  if (c.kind == ReachCell::Kind::kSelf) return b + " itself";
  if (c.nic == nullptr)
    return a + " -> " + b + ": " + (in.hosts[to].ssh_error ? "ssh to " + b + " failed" : b + " has no such NIC");
  if (in.hosts[from].ssh_error) return a + " -> " + b + ": ssh to " + a + " failed";
  std::string text = a + " -> " + b + " " + c.nic->iface + " " +
                     (c.view && !c.view->address.empty() ? c.view->address : c.nic->address) + ": ";
  if (c.kind == ReachCell::Kind::kNotProbed) return text + "not probed";
  text += to_string(c.outcome);
  if (c.view != nullptr && c.view->elapsed.count() > 0)
    text += " after " + std::to_string(c.view->elapsed.count()) + " ms";
  if (c.view != nullptr && c.outcome == ProbeOutcome::kWrongHost && !c.view->answered_as.empty())
    text += " (answered as " + c.view->answered_as + ")";
  return text;
}

std::string matrix_table(const CheckInput& in, const NicPick& pick, const std::string& id) {
  const auto cells = reach_cells(in, pick);
  std::vector<std::string> names;
  for (const HostCheck& h : in.hosts) names.push_back(h.host);
  const auto groups = name_groups(names, kMaxPageColumns);
  std::vector<std::string> labels;
  for (const auto& g : groups) {
    std::vector<std::string> members;
    for (std::size_t i : g) members.push_back(names[i]);
    labels.push_back(fold_names(members));
  }
  std::string out = "<table class=\"matrix\" id=\"" + html_escape(id) + "\">\n<tr><th></th>";
  for (std::size_t c = 0; c < groups.size(); ++c)
    out += "<th title=\"" + html_escape(labels[c]) + "\">" + std::to_string(c % 10) + "</th>";
  out += "</tr>\n";
  for (std::size_t r = 0; r < groups.size(); ++r) {
    out += "<tr><th class=\"row\">" + std::to_string(r) + " " + html_escape(labels[r]) + "</th>";
    for (std::size_t c = 0; c < groups.size(); ++c) {
      const ReachCell* worst = nullptr;
      std::size_t worst_from = 0, worst_to = 0;
      std::vector<std::string> titles;
      for (std::size_t from : groups[r]) {
        for (std::size_t to : groups[c]) {
          const ReachCell& cell = cells[from][to];
          if (groups[r].size() == 1 || cell_badness(cell) > 0) titles.push_back(verdict_of(in, from, to, cell));
          if (worst == nullptr || cell_badness(cell) > cell_badness(*worst)) {
            worst = &cell;
            worst_from = from;
            worst_to = to;
          }
        }
      }
      if (titles.size() > 12) {
        const std::size_t more = titles.size() - 12;
        titles.resize(12);
        titles.push_back("and " + std::to_string(more) + " more");
      }
      HVRUN_INVARIANT(worst != nullptr);  // groups are never empty
      if (titles.empty()) titles.push_back(labels[r] + " -> " + labels[c] + ": ok");
      std::string title;
      for (const auto& t : titles) title += (title.empty() ? "" : "\n") + t;
      out += "<td class=\"" + std::string(css_class(*worst)) + "\" data-from=\"" +
             html_escape(in.hosts[worst_from].host) + "\" data-to=\"" + html_escape(in.hosts[worst_to].host) +
             "\" title=\"" + html_escape(title) + "\">" + html_escape(std::string(1, cell_char(*worst))) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

void write_report_file(const std::string& path, const std::string& page) {
  const std::string context = "--report " + path + ": give a path in a writable directory";
  // Its directory may be shared (/tmp): the file is made there without following a link, and one that is
  // there is emptied only when it is the user's own (common/checked_directory.hpp).
  UniqueFd fd = CheckedDirectory::create_file_at(path, 0644, "--report");
  std::size_t done = 0;
  while (done < page.size()) {
    const ssize_t n = retry_eintr([&] { return ::write(fd.get(), page.data() + done, page.size() - done); });
    if (n < 0) throw_errno("write", context);
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd.release()) != 0) throw_errno("close", context);
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string check_html(const CheckInput& in, const std::string& summary) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>hvrun --check-only: " +
      std::to_string(in.hosts.size()) + " hosts</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  out += "<h1>hvrun --check-only</h1>\n<h2>Summary</h2>\n<pre id=\"summary\">" + html_escape(summary) + "</pre>\n";
  out +=
      "<h2>Who reaches whom: the chosen NICs</h2>\n<p>Row: the host that probes; column: the host probed, over its "
      "chosen NIC (the best one where it has none). Hover over a cell for its verdict.</p>\n";
  out +=
      "<p class=\"legend\"><span style=\"background:#2e9e44\"></span>ok<span style=\"background:#d7261e\"></span>"
      "timeout, refused, unreachable<span style=\"background:#e8b100\"></span>wrong host or bad HMAC"
      "<span style=\"background:#bbbbbb\"></span>not probed<span style=\"background:#f0f0f0\"></span>no such NIC "
      "or ssh failed</p>\n";
  out += matrix_table(
      in, [](const HostCheck& h) { return shown_nic(h); }, "matrix-chosen");
  const auto one_way = one_way_pairs(in);
  if (!one_way.empty()) {
    out += "<ul id=\"one-way\">\n";
    for (const OneWayPair& p : one_way)
      out += "<li>one-way: " +
             html_escape(in.hosts[p.from].host + " -> " + in.hosts[p.to].host + " " + to_string(p.outcome) + ", " +
                         in.hosts[p.to].host + " -> " + in.hosts[p.from].host + " ok") +
             "</li>\n";
    out += "</ul>\n";
  }
  // One matrix per other NIC name that some host offered and not every holder chose.
  std::vector<std::string> others;
  for (const HostCheck& h : in.hosts) {
    for (const NicVerdict& v : h.selection.nics) {
      const bool chosen_everywhere = std::all_of(in.hosts.begin(), in.hosts.end(), [&](const HostCheck& o) {
        const bool has = std::any_of(o.selection.nics.begin(), o.selection.nics.end(),
                                     [&](const NicVerdict& w) { return w.iface == v.iface; });
        return !has || (o.selection.selected && o.selection.selected->iface == v.iface);
      });
      if (!chosen_everywhere && std::find(others.begin(), others.end(), v.iface) == others.end())
        others.push_back(v.iface);
    }
  }
  for (const auto& name : others) {
    out += "<h2>" + html_escape(name) + "</h2>\n";
    out += matrix_table(
        in,
        [&](const HostCheck& h) -> const NicVerdict* {
          for (const NicVerdict& v : h.selection.nics)
            if (v.iface == name) return &v;
          return nullptr;
        },
        "matrix-" + name);
  }
  return out + "</body>\n</html>\n";
}

}  // namespace hvrun

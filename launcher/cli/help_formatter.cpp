#include "launcher/cli/help_formatter.hpp"

#include <algorithm>
#include <sstream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "launcher/cli/option_spelling.hpp"

namespace hvrun {

namespace {

constexpr const char* kUsage = "hvrun [options] [--] command [args...]";

// `text` cut at spaces into lines of at most `width` characters (a longer word stays whole).
std::vector<std::string> wrap(std::string_view text, std::size_t width) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(std::move(line));
      line.clear();
    }
    line += (line.empty() ? "" : " ") + std::string(word);
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

bool shown(const CLI::Option* opt) { return !opt->get_group().empty() && opt->nonpositional(); }

}  // namespace

std::string HelpFormatter::make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const {
  std::ostringstream out;
  out << make_description(app) << make_usage(app, "");
  for (const std::string& group : group_order(*app)) {
    out << "\n" << group << ":\n";
    for (const CLI::Option* opt : app->get_options())
      if (shown(opt) && opt->get_group() == group) out << make_option(opt, false);
  }
  out << "\n" << make_footer(app);
  return out.str();
}

std::string HelpFormatter::make_usage(const CLI::App*, std::string) const {
  return std::string("Usage: ") + kUsage + "\n";
}

std::string HelpFormatter::make_option(const CLI::Option* opt, bool is_positional) const {
  std::string left = "  " + make_option_name(opt, is_positional) + make_option_opts(opt);
  std::string out;
  if (left.size() + 2 > kHelpColumn) {
    out = left + "\n";
    left.clear();
  }
  const std::vector<std::string> lines = wrap(opt->get_description(), kHelpWidth - kHelpColumn);
  if (lines.empty() && !left.empty()) out += left + "\n";
  for (const std::string& line : lines) {
    left.resize(kHelpColumn, ' ');
    out += left + line + "\n";
    left.clear();
  }
  return out;
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  std::string names;
  if (!is_positional && !opt->get_lnames().empty())
    for (const std::string& alias : single_dash_aliases("--" + opt->get_lnames().front())) names += alias + ",";
  return names + CLI::Formatter::make_option_name(opt, is_positional);
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  const std::string value = value_name(*opt);
  return value.empty() ? std::string() : " " + value;
}

std::string HelpFormatter::value_name(const CLI::Option& opt) {
  if (opt.get_type_size_max() == 0) return {};
  const std::string full = opt.get_type_name();
  return full.substr(0, full.find(':'));
}

std::vector<std::string> HelpFormatter::group_order(const CLI::App& app) {
  std::vector<std::string> present;
  for (const CLI::Option* opt : app.get_options())
    if (shown(opt) && std::find(present.begin(), present.end(), opt->get_group()) == present.end())
      present.push_back(opt->get_group());
  std::vector<std::string> order;
  for (const char* group : kHelpGroups)
    if (std::find(present.begin(), present.end(), group) != present.end()) order.emplace_back(group);
  for (const std::string& group : present)
    if (std::find(order.begin(), order.end(), group) == order.end()) order.push_back(group);
  return order;
}

}  // namespace hvrun

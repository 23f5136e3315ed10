#include <catch2/catch.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/common.h>

#include "common/log.hpp"
#include "launcher/cli/cli_bindings.hpp"
#include "launcher/cli/help_formatter.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/nic/probe_peers.hpp"

namespace {

// A level as --hvrun-log-level spells it ("warn", where spdlog says "warning").
std::string level_name(hvrun::LogLevel level) {
  for (const char* name : {"trace", "debug", "info", "warn", "error", "off"})
    if (spdlog::level::from_str(name) == level) return name;
  return "?";
}

// `hvrun --help` as hvrun prints it, from the same definitions and with the same defaults.
struct Help {
  hvrun::LaunchOptions options;
  hvrun::CliBindings bindings{options};
  CLI::App app;
  std::string text;
  std::vector<std::string> lines;
  std::map<std::string, std::string> entry;  // every name on an option line -> its description, joined
  std::vector<std::string> listed;           // the names of the option lines, in the order shown
  std::vector<std::size_t> description_at;   // the column of each description line

  Help() {
    hvrun::define_options(app, bindings);
    text = app.help();
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::vector<std::string> names;  // of the option whose lines are being read
    for (const std::string& line : lines) {
      if (line.starts_with("  -")) {
        // NAMES[ VALUE], then two spaces or more and the description, or nothing (names too wide).
        const std::size_t gap = line.find("  ", 2);
        const std::string left = line.substr(2, gap == std::string::npos ? std::string::npos : gap - 2);
        names.clear();
        std::stringstream words(left.substr(0, left.find(' ')));
        for (std::string name; std::getline(words, name, ',');) {
          names.push_back(name);
          listed.push_back(name);
          entry[name];
        }
        if (gap != std::string::npos) {
          description_at.push_back(line.find_first_not_of(' ', gap));
          for (const auto& n : names) entry[n] = line.substr(description_at.back());
        }
      } else if (line.starts_with(std::string(hvrun::kHelpColumn, ' '))) {
        description_at.push_back(line.find_first_not_of(' '));
        for (const auto& n : names) entry[n] += (entry[n].empty() ? "" : " ") + line.substr(hvrun::kHelpColumn);
      } else {
        names.clear();
      }
    }
  }
};

std::string seconds_text(double s) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, s).ptr);
}

}  // namespace

TEST_CASE("--help shows the groups in their order, each option once", "[cli][help]") {
  const Help h;
  SECTION("the group headings, in kHelpGroups' order") {
    std::vector<std::string> headings;
    for (const auto& line : h.lines)
      if (!line.empty() && line.front() != ' ' && line.ends_with(":") && !line.starts_with("Usage")) headings.push_back(line);
    std::vector<std::string> expected;
    for (const char* g : hvrun::kHelpGroups) expected.push_back(std::string(g) + ":");
    CHECK(headings == expected);
  }
  SECTION("every visible option exactly once, every hidden one never") {
    std::size_t visible = 0;
    for (const CLI::Option* opt : h.app.get_options()) {
      const std::string name = "--" + opt->get_lnames().front();
      const auto count = std::count(h.listed.begin(), h.listed.end(), name);
      INFO(name);
      CHECK(count == (opt->get_group().empty() ? 0 : 1));
      if (!opt->get_group().empty()) {
        ++visible;
        CHECK_FALSE(h.entry.at(name).empty());  // it says what it does
      }
    }
    const auto option_lines =
        std::count_if(h.lines.begin(), h.lines.end(), [](const std::string& l) { return l.starts_with("  -"); });
    CHECK(static_cast<std::size_t>(option_lines) == visible);  // one entry per option, nothing else
    CHECK(visible > 70);
    const std::vector<std::string> hidden{"--no-autotune", "--stall-check", "--log-hide-timestamp"};
    for (const auto& name : hidden) CHECK(h.entry.count(name) == 0);
    CHECK(h.entry.count("-np") == 1);   // the spellings normalize_option_words accepts
    CHECK(h.entry.count("-cb") == 1);
    CHECK(h.entry.count("--max-np") == 1);
    CHECK_THAT(h.entry.at("--max-np"), Catch::StartsWith("Horovod elastic"));
    CHECK_THAT(h.entry.at("--min-np"), Catch::StartsWith("Horovod elastic") && Catch::Contains("--max-restarts"));
    CHECK_THAT(h.entry.at("--jsrun"), Catch::StartsWith("Refused"));
  }
  SECTION("lines of at most 100 columns, descriptions in one column, no CLI11 residue") {
    for (const auto& line : h.lines) {
      INFO(line);
      CHECK(line.size() <= hvrun::kHelpWidth);
      for (const char* residue : {"Excludes", "Needs:", "INT in [", "in [1 - ", "REQUIRED", ":{", " x 2"})
        CHECK(line.find(residue) == std::string::npos);
    }
    CHECK(h.description_at.size() > 70);
    for (const std::size_t column : h.description_at) CHECK(column == hvrun::kHelpColumn);
  }
  SECTION("value names as typed, without the validators' descriptions") {
    CHECK_THAT(h.text, Catch::Contains("\n  -np,-n,--num-proc N "));
    CHECK_THAT(h.text, Catch::Contains("\n  --connect-concurrency N "));
    CHECK_THAT(h.text, Catch::Contains("\n  --launcher WAY "));
    CHECK_THAT(h.text, Catch::Contains("\n  --blacklist-cooldown-range MIN MAX\n"));
    CHECK_THAT(h.text, Catch::Contains("\n  -cb,--check-build "));
    CHECK_THAT(h.text, Catch::Contains("\n  --nnodes NODES "));
    CHECK_THAT(h.text, Catch::Contains("\n  --rdzv-endpoint,--rdzv_endpoint ENDPOINT\n"));
  }
}

TEST_CASE("--help states the defaults the parser uses", "[cli][help]") {
  const Help h;
  const hvrun::CliBindings& b = h.bindings;
  const hvrun::LaunchOptions& o = h.options;
  CHECK_THAT(h.entry.at("--num-proc"), Catch::Contains("(default: all slots)"));
  CHECK_THAT(h.entry.at("--start-timeout"), Catch::Contains("else " + seconds_text(b.start_timeout) + ";"));
  CHECK_THAT(h.entry.at("--kill-grace"), Catch::Contains("(default: " + seconds_text(b.kill_grace) + ")"));
  CHECK_THAT(h.entry.at("--heartbeat-timeout"),
             Catch::Contains("(default: " + seconds_text(b.heartbeat_timeout) + ")"));
  CHECK_THAT(h.entry.at("--ssh-connect-timeout"),
             Catch::Contains("(default: " + seconds_text(b.ssh_connect_timeout) + ")"));
  CHECK_THAT(h.entry.at("--probe-timeout"), Catch::Contains("(default: " + seconds_text(b.probe_timeout) + ")"));
  CHECK_THAT(h.entry.at("--connect-concurrency"),
             Catch::Contains("(default: " + std::to_string(o.connect_concurrency) + ")"));
  CHECK_THAT(h.entry.at("--probe-peers"), Catch::Contains("(default: " + std::to_string(hvrun::kDefaultProbePeers)));
  CHECK_THAT(h.entry.at("--hvrun-log-level"), Catch::Contains("(default: " + level_name(o.log_level) + ")"));
  CHECK_THAT(h.entry.at("--launcher"), Catch::Contains("(default: "));
  CHECK(b.launcher == "auto");
}

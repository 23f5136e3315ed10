#include "launcher/cli/option_spelling.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include <CLI/CLI.hpp>

#include "common/error.hpp"

namespace hvrun {

namespace {

// Single-dash spellings whose long option has another name.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kAliases{{
    {"-np", "--num-proc"},
    {"-cb", "--check-build"},
    {"-prefix-timestamp", "--prefix-output-with-timestamp"},
}};

// How many words after it an option takes when its value is not attached with '='.
int values_taken(const CLI::Option& opt) {
  if (opt.get_expected_max() == 0 || opt.get_type_size_max() == 0) return 0;  // a flag
  return std::max(opt.get_expected_min(), 1);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> single_dash_aliases(std::string_view long_name) {
  std::vector<std::string> aliases;
  for (const auto& [alias, target] : kAliases)
    if (target == long_name) aliases.emplace_back(alias);
  return aliases;
}

std::string closest_option(std::string_view word, const CLI::App& app) {
  const std::string_view bare = word.substr(0, word.find('='));
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  auto consider = [&](const std::string& name) {
    const std::size_t d = edit_distance(bare, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  };
  // A single-dash word gets single-dash spellings too (-hostfile for -hostfiel), as mpirun users type.
  const bool single_dash = bare.size() > 2 && bare[1] != '-';
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) consider((single_dash ? "-" : "--") + l);
    for (const auto& s : opt->get_snames()) consider("-" + s);
  }
  for (const auto& [alias, target] : kAliases) consider(std::string(alias));
  return best;
}

std::vector<std::string> normalize_option_words(const std::vector<std::string>& args, const CLI::App& app) {
  std::vector<std::string> out = args;
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::string& w = out[i];
    if (w == "--" || w.size() < 2 || w.front() != '-') break;  // the command starts here
    const std::size_t eq = w.find('=');
    const bool attached = eq != std::string::npos;
    std::string name = w.substr(0, eq);
    if (w[1] != '-' && name.size() > 2) {
      const auto alias = std::find_if(kAliases.begin(), kAliases.end(), [&](const auto& a) { return a.first == name; });
      if (alias != kAliases.end()) {
        name = std::string(alias->second);
      } else if (app.get_option_no_throw("-" + name) != nullptr) {
        name = "-" + name;
      } else {
        const CLI::Option* short_opt = app.get_option_no_throw(w.substr(0, 2));
        // -np4 is a misspelt -np 4, not -n with the value "p4".
        if (short_opt == nullptr || values_taken(*short_opt) == 0 || name.starts_with("-np")) {
          throw UsageError("unknown option '" + w + "' (did you mean " + closest_option(w, app) + "?)");
        }
        continue;  // a short option with its value attached: -Ha:2, -p2222
      }
      w = name + (attached ? w.substr(eq) : std::string());
    }
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) {
      if (name.starts_with("--")) continue;  // unknown long option: reported after the parse
      throw UsageError("unknown option '" + w + "' (did you mean " + closest_option(w, app) + "?)");
    }
    if (!attached) i += static_cast<std::size_t>(values_taken(*opt));
  }
  return out;
}

}  // namespace hvrun

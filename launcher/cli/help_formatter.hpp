#pragma once
// The layout of `hvrun --help`: the options in named groups shown in a fixed order (kHelpGroups), one
// entry per option with its names, its value's name and what it does with its default, the descriptions
// wrapped into one aligned column, no line wider than kHelpWidth, and none of CLI11's own annotations
// (validator ranges such as "INT in [1 - 100000]", "Excludes: ..."). hvrun-docs (cmd/hvrun_docs_main.cpp)
// names options and values and orders the groups through the same functions, so hvrun(1) and the bash
// completion match the help.
#include <array>
#include <cstddef>
#include <functional>  // CLI/FormatterFwd.hpp uses std::function without including it
#include <string>
#include <vector>

#include <CLI/FormatterFwd.hpp>

namespace hvrun {

// The help's group headings; every option's ->group() is one of them (or "" to hide it).
namespace help_group {
inline constexpr const char* kHosts = "Ranks and hosts";
inline constexpr const char* kSsh = "SSH and remote agents";
inline constexpr const char* kNetwork = "Network";
inline constexpr const char* kSupervision = "Supervision";
inline constexpr const char* kOutput = "Output and logging";
inline constexpr const char* kChecks = "Checks without a launch";
inline constexpr const char* kTuning = "horovodrun's tuning: HOROVOD_* for the ranks, set only when given (else Horovod's defaults)";
inline constexpr const char* kAutotune = "horovodrun's autotune, timeline, stall check and logging (HOROVOD_*)";
inline constexpr const char* kTorchrun = "torchrun's options, for every host at once (README \"Coming from torchrun\")";
inline constexpr const char* kElastic = "Elastic training: refused (hvrun runs fixed-size jobs)";
inline constexpr const char* kMpirun = "Controllers and mpirun compatibility";
inline constexpr const char* kAbout = "About hvrun";
}  // namespace help_group

// The order the groups are shown in.
inline constexpr std::array kHelpGroups{
    help_group::kHosts,   help_group::kSsh,      help_group::kNetwork, help_group::kSupervision,
    help_group::kOutput,  help_group::kChecks,   help_group::kTuning,  help_group::kAutotune,
    help_group::kTorchrun, help_group::kElastic, help_group::kMpirun, help_group::kAbout,
};

inline constexpr std::size_t kHelpWidth = 100;  // no help line is longer
inline constexpr std::size_t kHelpColumn = 34;  // where every description starts

class HelpFormatter : public CLI::Formatter {
 public:
  // Description, usage, the groups in help_groups() order, the footer.
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;
  std::string make_usage(const CLI::App* app, std::string name) const override;
  // "  NAMES VALUE" then the description, wrapped at kHelpWidth from kHelpColumn; names too wide for
  // the column get a line of their own and the description starts on the next one.
  std::string make_option(const CLI::Option* opt, bool is_positional) const override;
  // The names as a user may type them, comma-joined: the single-dash spellings normalize_option_words
  // accepts first (-np,-n,--num-proc).
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
  // " VALUE" for an option that takes one, "" for a flag.
  std::string make_option_opts(const CLI::Option* opt) const override;

  // The name of the value `opt` takes ("SECONDS"), without the validators' descriptions CLI11 appends;
  // "" for a flag. Type names hold no ':', which is where CLI11 starts appending.
  static std::string value_name(const CLI::Option& opt);
  // The groups of `app`'s visible options in the order the help shows them: kHelpGroups first, then
  // any other group in definition order.
  static std::vector<std::string> group_order(const CLI::App& app);
};

}  // namespace hvrun

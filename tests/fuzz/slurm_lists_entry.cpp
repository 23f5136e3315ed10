// Fuzz target body: expand_slurm_host_list and expand_slurm_counts (launcher/cli/slurm_host_list.hpp). The
// input's first line is a host list (SLURM_JOB_NODELIST), the rest a count list (SLURM_TASKS_PER_NODE).
// Their documented failure is UsageError. Checked besides, on what they accept:
//   - at most kMaxSlurmListSize entries; names non-empty, unique, free of blanks, control characters,
//     commas and brackets (each one is usable as a host name); counts positive;
//   - the names joined with commas, and the counts written one by one, expand to the same lists (for
//     lists of up to kRoundTripMax entries: the property is the same for longer ones, and re-expanding
//     100000 names under the sanitizers costs seconds per input).
#include <unordered_set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/slurm_host_list.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

namespace {

constexpr std::size_t kRoundTripMax = 2000;

void check_names(std::string_view input) {
  std::vector<std::string> names;
  try {
    names = expand_slurm_host_list(input, "fuzz");
  } catch (const UsageError&) {
    return;
  }
  expect(!names.empty() && names.size() <= kMaxSlurmListSize, std::to_string(names.size()) + " names accepted");
  std::unordered_set<std::string_view> seen;
  seen.reserve(names.size());
  std::string joined;
  for (const auto& n : names) {
    expect(!n.empty(), "an empty name was accepted");
    for (const char c : n) {
      const auto u = static_cast<unsigned char>(c);
      expect(u > ' ' && u != 0x7f, "name '" + n + "' holds a blank or a control character");
      expect(std::string_view(",[]").find(c) == std::string_view::npos, "name '" + n + "' holds '" + c + "'");
    }
    expect(seen.insert(n).second, "name '" + n + "' expanded twice");
    joined += (joined.empty() ? "" : ",") + n;
  }
  if (names.size() > kRoundTripMax) return;
  try {
    expect(expand_slurm_host_list(joined, "fuzz") == names, "the names written back expand differently");
  } catch (const UsageError& e) {
    expect(false, std::string("the names written back are refused: ") + e.what());
  }
}

void check_counts(std::string_view input) {
  std::vector<int> counts;
  try {
    counts = expand_slurm_counts(input, "fuzz");
  } catch (const UsageError&) {
    return;
  }
  expect(!counts.empty() && counts.size() <= kMaxSlurmListSize, std::to_string(counts.size()) + " counts accepted");
  std::string written;
  for (const int c : counts) {
    expect(c > 0, "count " + std::to_string(c) + " accepted");
    written += (written.empty() ? "" : ",") + std::to_string(c);
  }
  if (counts.size() > kRoundTripMax) return;
  try {
    expect(expand_slurm_counts(written, "fuzz") == counts, "the counts written back expand differently");
  } catch (const UsageError& e) {
    expect(false, std::string("the counts written back are refused: ") + e.what());
  }
}

}  // namespace

void slurm_lists(std::string_view input) {
  const auto nl = input.find('\n');
  check_names(input.substr(0, nl));
  if (nl != std::string_view::npos) check_counts(input.substr(nl + 1));
}

}  // namespace hvrun::fuzz

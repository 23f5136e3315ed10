#pragma once
// Slurm's compressed lists as an allocation's environment holds them: SLURM_JOB_NODELIST
// (`node[1-3,7]`, `gpu[01-04],cpu5`) and SLURM_TASKS_PER_NODE (`2(x3),1`). The rules follow what
// Slurm 22.05's `scontrol show hostnames` accepts, and the unit tests compare with it where it is installed.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

// More names or counts than this is refused: no allocation is that large, and a typo such as
// `n[1-99999999]` must not fill memory.
inline constexpr std::size_t kMaxSlurmListSize = 100'000;

// Expands a host list. Items are separated by commas or blanks outside brackets (empty items are
// skipped, as Slurm does). An item is a prefix followed by bracket groups, each group a comma list of
// `N` or `N-M` (decimal, N <= M), and text between groups: `rack[1-2]-n[1-3]`. Several groups give
// every combination, the first group slowest. A number is zero-padded to the width its lower bound is
// written with (`[08-10]` → 08 09 10, `[9-11]` → 9 10 11). Text after the last group, nested or
// unbalanced brackets, a name listed twice and lists beyond kMaxSlurmListSize are refused with a
// UsageError "<where>: '<list>': <why>".
std::vector<std::string> expand_slurm_host_list(std::string_view list, const std::string& where);

// Expands per-node counts: comma-separated `N` or `N(xM)` (N repeated M times), N and M positive.
// Errors as above.
std::vector<int> expand_slurm_counts(std::string_view list, const std::string& where);

}  // namespace hvrun

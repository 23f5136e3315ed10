// libFuzzer target: Slurm's host lists and task counts (first line, then the rest).
// The body, with what it checks, is hvrun::fuzz::slurm_lists in tests/fuzz/slurm_lists_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::slurm_lists(hvrun::fuzz::as_text(data, size));
  return 0;
}

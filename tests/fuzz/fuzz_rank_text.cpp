// libFuzzer target: a rank's stderr and stack texts as hvrun reads them (StderrDigest, the failure
// report, the autopsy's groups). The body, with what it checks, is hvrun::fuzz::rank_text in
// tests/fuzz/rank_text_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::rank_text(hvrun::fuzz::as_text(data, size));
  return 0;
}

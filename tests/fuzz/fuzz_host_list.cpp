// libFuzzer target: parse_host_list (one -H value).
// The body, with what it checks, is hvrun::fuzz::host_list in tests/fuzz/host_list_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::host_list(hvrun::fuzz::as_text(data, size));
  return 0;
}

// libFuzzer target: parse_hostfile (a hostfile's contents).
// The body, with what it checks, is hvrun::fuzz::hostfile in tests/fuzz/host_list_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::hostfile(hvrun::fuzz::as_text(data, size));
  return 0;
}

// libFuzzer target: NicFilter::parse (one --network-interface value per line).
// The body, with what it checks, is hvrun::fuzz::nic_filter in tests/fuzz/nic_filter_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::nic_filter(hvrun::fuzz::as_text(data, size));
  return 0;
}

// libFuzzer target: store::decode (one store frame's payload).
// The body, with what it checks, is hvrun::fuzz::store_protocol in tests/fuzz/store_protocol_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::store_protocol(hvrun::fuzz::as_text(data, size));
  return 0;
}

// libFuzzer target: decode_control.
// The body, with what it checks, is hvrun::fuzz::control_message in tests/fuzz/control_message_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::control_message(hvrun::fuzz::as_text(data, size));
  return 0;
}

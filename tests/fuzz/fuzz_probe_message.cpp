// libFuzzer target: decode_probe_challenge and decode_probe_answer.
// The body, with what it checks, is hvrun::fuzz::probe_message in tests/fuzz/probe_message_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::probe_message(hvrun::fuzz::as_text(data, size));
  return 0;
}

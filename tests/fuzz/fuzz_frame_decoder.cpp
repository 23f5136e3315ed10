// libFuzzer target: FrameDecoder in seeded chunkings, and decode_output.
// The body, with what it checks, is hvrun::fuzz::frame_decoder in tests/fuzz/frame_decoder_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::frame_decoder(hvrun::fuzz::as_text(data, size));
  return 0;
}

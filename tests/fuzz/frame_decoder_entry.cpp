// Fuzz target body: FrameDecoder (common/frame_codec.hpp) and decode_output (common/control_message.hpp).
//
// Input: 4 seed bytes, then the stream. The seed picks the payload limit and the chunk sizes the stream
// is fed in, so mutating it explores chunkings (a peer's bytes arrive split anywhere).
// Checked, besides "only ProtocolError":
//   - the stream fed in chunks and fed whole gives the same frames, then the same error or none;
//   - the frames re-encode (encode_frame) to exactly the bytes they came from, reserved header bytes
//     aside (the decoder ignores them);
//   - after the stream, finish() throws exactly when bytes are left over;
//   - decode_output on every output frame and on the raw stream; what it returns re-encodes to the
//     payload (encode_output is its inverse).
#include <optional>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

namespace {

constexpr std::size_t kSeedSize = 4;

// What one way of feeding the stream produced.
struct Outcome {
  std::vector<Frame> frames;
  std::optional<std::string> error;  // the ProtocolError's message, if one ended the stream
  std::size_t buffered = 0;          // left in the decoder at the end (no error)
  bool finish_threw = false;
};

// xorshift32: a deterministic chunking from the seed, so a saved input replays the same way.
class Chunker {
 public:
  explicit Chunker(std::uint32_t seed) : state_(seed | 1), max_chunk_(1 + (seed & 0xff)) {}
  std::size_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return 1 + state_ % max_chunk_;
  }

 private:
  std::uint32_t state_;
  std::uint32_t max_chunk_;  // 1..256: from byte-by-byte to a few frames at a time
};

// Feeds `stream` in pieces of `chunker`'s sizes (all at once without one), draining frames after each.
Outcome decode(std::string_view stream, std::size_t max_payload, std::optional<Chunker> chunker) {
  Outcome out;
  FrameDecoder decoder("fuzz peer", max_payload);
  try {
    for (std::size_t pos = 0; pos < stream.size();) {
      const std::size_t n = chunker ? chunker->next() : stream.size();
      decoder.feed(stream.substr(pos, n));
      pos += std::min(n, stream.size() - pos);
      while (auto frame = decoder.next()) out.frames.push_back(std::move(*frame));
    }
  } catch (const ProtocolError& e) {
    out.error = e.what();
    return out;
  }
  out.buffered = decoder.buffered();
  try {
    decoder.finish();
  } catch (const ProtocolError&) {
    out.finish_threw = true;
  }
  return out;
}

void check_output_payload(std::string_view payload) {
  OutputChunk chunk;
  try {
    chunk = decode_output(payload, "fuzz peer");
  } catch (const ProtocolError&) {
    return;
  }
  expect(chunk.rank >= 0, "decode_output gave a negative rank");
  expect(encode_output(chunk.rank, chunk.stream, chunk.bytes) == payload,
         "decode_output's chunk does not re-encode to its payload");
}

}  // namespace

void frame_decoder(std::string_view input) {
  std::uint32_t seed = 0;
  for (std::size_t i = 0; i < kSeedSize && i < input.size(); ++i)
    seed = (seed << 8) | static_cast<unsigned char>(input[i]);
  const std::string_view stream = input.substr(std::min(input.size(), kSeedSize));
  // The limits in use: the default, the store's before authentication, and two that make the
  // oversize path easy to reach.
  constexpr std::size_t kLimits[] = {kMaxFramePayload, 1024, 0, 16};
  const std::size_t max_payload = kLimits[(seed >> 8) & 3];

  const Outcome whole = decode(stream, max_payload, std::nullopt);
  const Outcome chunked = decode(stream, max_payload, Chunker(seed));

  expect(whole.frames.size() == chunked.frames.size(), "chunked feeding changed the number of frames");
  for (std::size_t i = 0; i < whole.frames.size(); ++i)
    expect(whole.frames[i].type == chunked.frames[i].type && whole.frames[i].payload == chunked.frames[i].payload,
           "chunked feeding changed frame " + std::to_string(i));
  expect(whole.error == chunked.error, "chunked feeding changed the error: '" + whole.error.value_or("none") +
                                           "' vs '" + chunked.error.value_or("none") + "'");
  expect(whole.buffered == chunked.buffered, "chunked feeding left a different number of bytes buffered");
  expect(whole.finish_threw == (!whole.error && whole.buffered != 0), "finish() disagrees with buffered()");

  std::string reencoded;
  for (const Frame& f : whole.frames) {
    expect(f.payload.size() <= max_payload, "a frame above the payload limit was accepted");
    std::string bytes = encode_frame(f.type, f.payload);
    expect(reencoded.size() + bytes.size() <= stream.size(), "frames add up to more bytes than were fed");
    bytes[6] = stream[reencoded.size() + 6];  // reserved: copied from the input, not checked
    bytes[7] = stream[reencoded.size() + 7];
    reencoded += bytes;
  }
  expect(stream.substr(0, reencoded.size()) == reencoded, "frames do not re-encode to the bytes they came from");
  if (!whole.error)
    expect(reencoded.size() + whole.buffered == stream.size(), "decoded and buffered bytes do not add up");

  for (const Frame& f : whole.frames)
    if (f.type == FrameType::kOutput) check_output_payload(f.payload);
  check_output_payload(stream);
}

}  // namespace hvrun::fuzz

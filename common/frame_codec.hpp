#pragma once
// The wire format between launcher and agent (and any other hvrun peer): a 12-byte header
// (magic "HVR1", version, type, reserved, big-endian payload length) and the payload.
// Control frames carry one JSON message; output frames carry raw bytes of a rank's stream; store frames
// carry one binary message of the rendezvous store (store::Message, common/store_protocol.hpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hvrun {

enum class FrameType : std::uint8_t { kControl = 1, kOutput = 2, kStore = 3 };

struct Frame {
  FrameType type = FrameType::kControl;
  std::string payload;
};

inline constexpr std::uint32_t kFrameMagic = 0x48565231;  // "HVR1"
inline constexpr std::uint8_t kWireVersion = 1;
inline constexpr std::size_t kFrameHeaderSize = 12;
// Output is sent in chunks far below this; the largest control message is a launch request.
inline constexpr std::size_t kMaxFramePayload = 16u << 20;

// Throws ProtocolError when the payload exceeds kMaxFramePayload.
std::string encode_frame(FrameType type, std::string_view payload);

// Incremental decoder for a byte stream from one peer. Errors are ProtocolError naming the peer and
// what was wrong; after an error the decoder must not be used again.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::string peer, std::size_t max_payload = kMaxFramePayload)
      : peer_(std::move(peer)), max_payload_(max_payload) {}

  // Frames longer than this are a ProtocolError; a server lowers it for peers it does not trust yet.
  void set_max_payload(std::size_t max_payload) { max_payload_ = max_payload; }

  void feed(std::string_view bytes);
  // The next complete frame, or nothing until more bytes arrive.
  std::optional<Frame> next();
  // Call at end of stream: a partial frame left in the buffer is a truncation error.
  void finish() const;
  std::size_t buffered() const { return buffer_.size() - offset_; }

 private:
  std::string peer_;
  std::size_t max_payload_;
  std::string buffer_;
  std::size_t offset_ = 0;
};

}  // namespace hvrun

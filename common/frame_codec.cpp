#include "common/frame_codec.hpp"

#include "common/error.hpp"

namespace hvrun {

namespace {
void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
std::uint32_t get_u32(std::string_view in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}
}  // namespace

std::string encode_frame(FrameType type, std::string_view payload) {
  if (payload.size() > kMaxFramePayload)
    throw ProtocolError("frame of " + std::to_string(payload.size()) + " bytes exceeds the maximum of " +
                        std::to_string(kMaxFramePayload));
  std::string out;
  out.reserve(kFrameHeaderSize + payload.size());
  put_u32(out, kFrameMagic);
  out.push_back(static_cast<char>(kWireVersion));
  out.push_back(static_cast<char>(type));
  out.push_back(0);
  out.push_back(0);
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

void FrameDecoder::feed(std::string_view bytes) {
  // Compact before growing so a long-lived stream does not keep consumed bytes.
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<Frame> FrameDecoder::next() {
  std::string_view rest(buffer_.data() + offset_, buffer_.size() - offset_);
  if (rest.size() < kFrameHeaderSize) {
    // Reject a wrong magic as soon as it can be seen, so garbage fails fast instead of waiting.
    for (std::size_t i = 0; i < rest.size() && i < 4; ++i)
      if (static_cast<unsigned char>(rest[i]) != ((kFrameMagic >> (24 - 8 * i)) & 0xff))
        throw ProtocolError(peer_ + ": bad frame magic (not an hvrun peer, or the stream is corrupt)");
    return std::nullopt;
  }
  if (get_u32(rest) != kFrameMagic)
    throw ProtocolError(peer_ + ": bad frame magic (not an hvrun peer, or the stream is corrupt)");
  const auto version = static_cast<std::uint8_t>(rest[4]);
  if (version != kWireVersion)
    throw ProtocolError(peer_ + ": wire version " + std::to_string(version) + ", expected " +
                        std::to_string(kWireVersion) + "; use the same hvrun version everywhere");
  const auto type = static_cast<std::uint8_t>(rest[5]);
  if (type != static_cast<std::uint8_t>(FrameType::kControl) &&
      type != static_cast<std::uint8_t>(FrameType::kOutput) && type != static_cast<std::uint8_t>(FrameType::kStore))
    throw ProtocolError(peer_ + ": unknown frame type " + std::to_string(type));
  const std::uint32_t length = get_u32(rest.substr(8));
  if (length > max_payload_)
    throw ProtocolError(peer_ + ": frame of " + std::to_string(length) + " bytes exceeds the maximum of " +
                        std::to_string(max_payload_));
  if (rest.size() < kFrameHeaderSize + length) return std::nullopt;
  Frame frame{static_cast<FrameType>(type), std::string(rest.substr(kFrameHeaderSize, length))};
  offset_ += kFrameHeaderSize + length;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  return frame;
}

void FrameDecoder::finish() const {
  if (buffered() != 0)
    throw ProtocolError(peer_ + ": connection closed in the middle of a frame (" + std::to_string(buffered()) +
                        " bytes of a truncated frame)");
}

}  // namespace hvrun

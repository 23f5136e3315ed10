// Fuzz target body: decode_control (common/control_message.hpp), the JSON messages between launcher and
// agent. Its documented failure is ProtocolError; a nlohmann exception escaping is a finding.
// Checked besides: a decoded message re-encodes (encode_control) to JSON that decodes again and
// encodes to the same text, so nothing the decoder accepts is changed by a second trip over the wire.
#include <optional>
#include <string>

#include "common/control_message.hpp"
#include "common/error.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

void control_message(std::string_view input) {
  std::optional<ControlMessage> msg;
  try {
    msg = decode_control(input, "fuzz peer");
  } catch (const ProtocolError&) {
    return;
  }
  const std::string once = encode_control(*msg);
  std::optional<ControlMessage> again;
  try {
    again = decode_control(once, "re-encoded");
  } catch (const ProtocolError& e) {
    expect(false, std::string("a re-encoded message does not decode: ") + e.what());
  }
  expect(again->index() == msg->index(), "a re-encoded message decodes as another type");
  expect(encode_control(*again) == once, "encode(decode(encode(m))) differs from encode(m): " + once);
}

}  // namespace hvrun::fuzz

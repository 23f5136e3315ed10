// Fuzz target body: decode_probe_challenge and decode_probe_answer (common/probe_message.hpp), the
// messages between agents, on the whole input; a probe port takes connections from anything on the
// network. Their documented failure is ProtocolError; a nlohmann exception escaping is a finding.
// Checked besides, on what either accepts: the fields are of their documented sizes and ranges, and
// the message re-encodes to text that decodes to the same message and encodes to the same text.
#include <string>

#include "common/error.hpp"
#include "common/probe_message.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

void probe_message(std::string_view input) {
  try {
    const ProbeChallenge c = decode_probe_challenge(input, "fuzz peer");
    expect(c.nonce.size() == kProbeNonceSize, "a challenge decoded with a nonce of another size");
    const std::string once = encode_probe_challenge(c);
    const ProbeChallenge again = decode_probe_challenge(once, "re-encoded");
    expect(again == c, "a re-encoded challenge decodes to another challenge");
    expect(encode_probe_challenge(again) == once, "encode(decode(encode(c))) differs from encode(c): " + once);
  } catch (const ProtocolError&) {
  }
  try {
    const ProbeAnswer a = decode_probe_answer(input, "fuzz peer");
    expect(a.host >= 0, "an answer decoded with a negative host index");
    expect(a.mac.size() == kProbeMacSize, "an answer decoded with a MAC of another size");
    const std::string once = encode_probe_answer(a);
    const ProbeAnswer again = decode_probe_answer(once, "re-encoded");
    expect(again == a, "a re-encoded answer decodes to another answer");
    expect(encode_probe_answer(again) == once, "encode(decode(encode(a))) differs from encode(a): " + once);
  } catch (const ProtocolError&) {
  }
}

}  // namespace hvrun::fuzz

// Fuzz target body: store::decode (common/store_protocol.hpp), one store frame's payload. Its documented
// failure is ProtocolError. Checked besides: the layout has exactly one encoding per message, so what
// decodes re-encodes to the same bytes; and op_name knows every operation the decoder lets through.
#include <string>

#include "common/error.hpp"
#include "common/store_protocol.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

void store_protocol(std::string_view input) {
  store::Message m;
  try {
    m = store::decode(input, "fuzz peer");
  } catch (const ProtocolError&) {
    return;
  }
  expect(std::string_view(store::op_name(m.op)) != "unknown", "decode let an unknown operation through");
  expect(store::encode(m) == input, "a decoded store message does not re-encode to its bytes");
}

}  // namespace hvrun::fuzz

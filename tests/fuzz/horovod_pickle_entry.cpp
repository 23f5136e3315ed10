// Fuzz target body: common/horovod_pickle.hpp's readers, which take what Horovod's workers (or
// anything that reaches an elastic driver's ports) send: unpickle_reply, unpickle_worker_addresses and
// decode_worker_addresses_put on the whole input, and open_horovod_message under a fixed key. Their
// documented failure is ProtocolError. Checked besides, on what they accept: ports in range, keys of
// the secret's size, and a sealed message that opens to its body and to nothing else under another key.
#include <string>

#include "common/horovod_pickle.hpp"
#include "hvrun/error.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

void horovod_pickle(std::string_view input) {
  try {
    unpickle_reply(input, "fuzz peer");
  } catch (const ProtocolError&) {
  }
  for (auto decode : {unpickle_worker_addresses, decode_worker_addresses_put}) {
    try {
      const HorovodWorkerAddresses a = decode(input, "fuzz peer");
      expect(a.key.size() == kHorovodSecretSize, "worker addresses decoded with a key of another size");
      for (const auto& [nic, addresses] : a.by_nic)
        for (const auto& address : addresses)
          expect(address.port >= 1 && address.port <= 65535, "a worker address decoded with port " +
                                                                  std::to_string(address.port));
    } catch (const ProtocolError&) {
    }
  }
  const std::string key(kHorovodSecretSize, 'k');
  try {
    const std::string body = open_horovod_message(key, input, "fuzz peer");
    expect(seal_horovod_message(key, body) == input, "an opened message seals to other bytes");
  } catch (const ProtocolError&) {
  }
  if (input.size() <= kHorovodMaxMessage) {
    const std::string sealed = seal_horovod_message(key, input);
    expect(open_horovod_message(key, sealed, "sealed") == input, "a sealed message opens to another body");
    bool refused = false;
    try {
      open_horovod_message(std::string(kHorovodSecretSize, 'x'), sealed, "another key");
    } catch (const ProtocolError&) {
      refused = true;
    }
    expect(refused, "a message sealed under one key opens under another");
  }
}

}  // namespace hvrun::fuzz

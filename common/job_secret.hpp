#pragma once
// The per-job secret: 32 random bytes (the kernel's getrandom), made by the launcher and sent to agents
// only on their control channels. It keys the HMAC-SHA256 that proves a peer belongs to this job.
// Never put it in argv, an environment variable of the agent, a file or a log line.
#include <array>
#include <string>
#include <string_view>

namespace hvrun {

class JobSecret {
 public:
  static constexpr std::size_t kSize = 32;
  static constexpr std::size_t kMacSize = 32;

  static JobSecret generate();
  // Throws ProtocolError for anything but 64 hex digits.
  static JobSecret from_hex(std::string_view hex);
  std::string hex() const;

  // HMAC-SHA256 of `data` under the secret (raw 32 bytes).
  std::string mac(std::string_view data) const;
  // The rendezvous store's token: derived, so it never travels, and a token read from a rank's
  // environment does not reveal the secret.
  std::string store_token() const;
  // Constant-time comparison of `mac_bytes` with mac(data).
  bool verify(std::string_view data, std::string_view mac_bytes) const;

 private:
  std::array<unsigned char, kSize> key_{};
};

// Lowercase hex of raw bytes, and back; hex_decode throws ProtocolError for anything but hex digits.
std::string hex_encode(std::string_view bytes);
std::string hex_decode(std::string_view hex);

// `n` random bytes from the kernel's getrandom(2) (secrets, nonces, tokens); throws SystemError.
std::string random_bytes(std::size_t n);

}  // namespace hvrun

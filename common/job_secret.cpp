#include "common/job_secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>

#include "common/error.hpp"

namespace hvrun {

JobSecret JobSecret::generate() {
  JobSecret s;
  const std::string key = random_bytes(kSize);
  std::copy(key.begin(), key.end(), s.key_.begin());
  return s;
}

std::string hex_encode(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

std::string hex_decode(std::string_view hex) {
  if (hex.size() % 2 != 0) throw ProtocolError("odd number of hex digits");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw ProtocolError("not a hex digit");
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return out;
}

// The kernel's generator, not OpenSSL's: RAND_bytes builds a DRBG (fetching AES-CTR through the provider
// tables) on its first call, which cost each agent about half a millisecond for one probe nonce.
std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t done = 0; done < n;) {
    const ssize_t got = ::getrandom(out.data() + done, n - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno("getrandom", "random bytes for a secret or a nonce");
    }
    done += static_cast<std::size_t>(got);
  }
  return out;
}

JobSecret JobSecret::from_hex(std::string_view hex) {
  if (hex.size() != 2 * kSize) throw ProtocolError("job secret of the wrong length");
  const std::string raw = hex_decode(hex);
  JobSecret s;
  std::copy(raw.begin(), raw.end(), s.key_.begin());
  return s;
}

std::string JobSecret::hex() const {
  return hex_encode(std::string_view(reinterpret_cast<const char*>(key_.data()), key_.size()));
}

std::string JobSecret::mac(std::string_view data) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) == nullptr)
    throw Error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string JobSecret::store_token() const { return hex_encode(mac("hvrun-store-token")); }

bool JobSecret::verify(std::string_view data, std::string_view mac_bytes) const {
  const std::string expected = mac(data);
  return mac_bytes.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), mac_bytes.data(), expected.size()) == 0;
}

}  // namespace hvrun

#include "agent/job_secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "agent/error.hpp"

namespace hvrun {

JobSecret JobSecret::generate() {
  JobSecret s;
  if (RAND_bytes(s.key_.data(), static_cast<int>(s.key_.size())) != 1)
    throw Error("RAND_bytes failed: cannot make a job secret");
  return s;
}

JobSecret JobSecret::from_hex(std::string_view hex) {
  if (hex.size() != 2 * kSize) throw ProtocolError("job secret of the wrong length");
  JobSecret s;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw ProtocolError("job secret is not hex");
  };
  for (std::size_t i = 0; i < kSize; ++i)
    s.key_[i] = static_cast<unsigned char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return s;
}

std::string JobSecret::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : key_) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

std::string JobSecret::mac(std::string_view data) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) == nullptr)
    throw Error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<char*>(out), len);
}

bool JobSecret::verify(std::string_view data, std::string_view mac_bytes) const {
  const std::string expected = mac(data);
  return mac_bytes.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), mac_bytes.data(), expected.size()) == 0;
}

}  // namespace hvrun

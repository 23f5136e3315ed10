#include "common/store_protocol.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/error.hpp"
#include "common/job_secret.hpp"

namespace hvrun::store {

namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<std::uint32_t>(bytes.size()));
  out.append(bytes);
}

// Reads fields off a payload; every read checks what is left, so no length can reach past the end.
class Reader {
 public:
  Reader(std::string_view in, const std::string& peer) : in_(in), peer_(peer) {}

  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)[0]); }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (char c : take(4)) v = (v << 8) | static_cast<unsigned char>(c);
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (char c : take(8)) v = (v << 8) | static_cast<unsigned char>(c);
    return v;
  }
  std::string bytes() { return std::string(take(u32())); }
  std::size_t left() const { return in_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw ProtocolError(peer_ + ": malformed store message: " + what);
  }

 private:
  std::string_view take(std::size_t n) {
    if (n > in_.size()) fail("truncated");
    std::string_view out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }
  std::string_view in_;
  const std::string& peer_;
};

std::string hmac(std::string_view key, std::string_view label, std::string_view nonce) {
  std::string data(label);
  data.append(nonce);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
           data.size(), out, &len) == nullptr)
    throw Error("HMAC-SHA256 failed (store authentication)");
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

std::string encode(const Message& m) {
  std::string out;
  std::size_t size = 3 + 4 + 8 + 4 + 8 + m.data.size() + m.data2.size();
  for (const auto& item : m.items) size += 4 + item.size();
  if (size > kMaxMessage)
    throw ProtocolError("store message of " + std::to_string(size) + " bytes exceeds the maximum of " +
                        std::to_string(kMaxMessage));
  out.reserve(size);
  out.push_back(static_cast<char>(m.kind));
  out.push_back(static_cast<char>(m.op));
  out.push_back(static_cast<char>(m.status));
  put_u32(out, m.timeout_ms);
  put_u64(out, static_cast<std::uint64_t>(m.number));
  put_u32(out, static_cast<std::uint32_t>(m.items.size()));
  for (const auto& item : m.items) put_bytes(out, item);
  put_bytes(out, m.data);
  put_bytes(out, m.data2);
  return out;
}

Message decode(std::string_view payload, const std::string& peer) {
  Reader r(payload, peer);
  Message m;
  const auto kind = r.u8();
  if (kind < static_cast<std::uint8_t>(Kind::kHello) || kind > static_cast<std::uint8_t>(Kind::kReply))
    r.fail("unknown kind " + std::to_string(kind));
  m.kind = static_cast<Kind>(kind);
  const auto op = r.u8();
  if (op > static_cast<std::uint8_t>(Op::kDelete)) r.fail("unknown operation " + std::to_string(op));
  m.op = static_cast<Op>(op);
  const auto status = r.u8();
  if (status > static_cast<std::uint8_t>(Status::kError)) r.fail("unknown status " + std::to_string(status));
  m.status = static_cast<Status>(status);
  m.timeout_ms = r.u32();
  m.number = static_cast<std::int64_t>(r.u64());
  const std::uint32_t n = r.u32();
  // Each item takes at least its 4-byte length: a count beyond that is a lie, caught before reserving.
  if (n > r.left() / 4) r.fail("item count " + std::to_string(n) + " exceeds the message");
  m.items.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) m.items.push_back(r.bytes());
  m.data = r.bytes();
  m.data2 = r.bytes();
  if (r.left() != 0) r.fail(std::to_string(r.left()) + " trailing bytes");
  return m;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::kNone: return "none";
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kWait: return "wait";
    case Op::kAdd: return "add";
    case Op::kCheck: return "check";
    case Op::kDelete: return "delete";
  }
  return "unknown";
}

std::string random_nonce() { return random_bytes(kNonceSize); }

std::string client_proof(std::string_view token, std::string_view server_nonce) {
  return hmac(token, "hvrun-store client", server_nonce);
}

std::string server_proof(std::string_view token, std::string_view client_nonce) {
  return hmac(token, "hvrun-store server", client_nonce);
}

bool proofs_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hvrun::store

#pragma once
// The rendezvous store's wire protocol, shared by StoreServer (agent/) and StoreClient (collectives/).
//
// Transport: frames of common/frame_codec.hpp with FrameType::kStore; each frame holds one StoreMessage
// in a compact binary layout (big-endian integers, length-prefixed byte strings, no nesting, so a
// decoder needs no recursion and every length is checked against what is left of the frame):
//
//   u8 kind | u8 op | u8 status | u32 timeout_ms | i64 number | u32 n | n × (u32 len, bytes) |
//   u32 len, bytes (data) | u32 len, bytes (data2)
//
// A connection runs:
//   server → client  kHello    data = server nonce (32 random bytes); number = protocol version
//   client → server  kAuth     data = HMAC-SHA256(token, "hvrun-store client" ‖ server nonce),
//                              data2 = client nonce
//   server → client  kAuthOk   data = HMAC-SHA256(token, "hvrun-store server" ‖ client nonce)
//                    (or kReply with status kError, then the server closes the connection)
//   then requests and replies, strictly one reply per request, in order:
//   kRequest op=kSet    items = {key}, data = value
//   kRequest op=kGet    items = keys, timeout_ms    → kReply items = values in the order asked
//   kRequest op=kWait   items = keys, timeout_ms    → kReply
//   kRequest op=kAdd    items = {key}, number = delta → kReply number = new value
//   kRequest op=kCheck  items = keys                → kReply number = 1 when all exist, else 0
//   kRequest op=kDelete items = {key}               → kReply number = 1 when it existed
//   A get or wait that times out on the server gets kReply status kTimeout, items = the missing keys.
//   A request the server cannot serve gets status kError, data = why; the connection stays usable.
//   Anything else (garbage, a frame over the limit, a request before authentication) closes the
//   connection. The token never crosses the wire; both sides prove they hold it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun::store {

inline constexpr std::uint8_t kProtocolVersion = 1;
// One message, values included. Values are small (Gloo's addresses, NCCL's id): 8 MiB leaves room
// for thousands of ranks' address lists in one multi-get.
inline constexpr std::size_t kMaxMessage = 8u << 20;
// Before authentication a peer may send only this much: the auth message is about 100 bytes.
inline constexpr std::size_t kMaxUnauthenticatedMessage = 1024;
inline constexpr std::size_t kMaxKeySize = 4096;
inline constexpr std::size_t kNonceSize = 32;
inline constexpr std::chrono::milliseconds kDefaultAuthTimeout{5000};
// A server never holds a request longer than this, whatever the client asked.
inline constexpr std::chrono::milliseconds kMaxRequestTimeout = std::chrono::hours(24);

enum class Kind : std::uint8_t { kHello = 1, kAuth = 2, kAuthOk = 3, kRequest = 4, kReply = 5 };
enum class Op : std::uint8_t { kNone = 0, kSet = 1, kGet = 2, kWait = 3, kAdd = 4, kCheck = 5, kDelete = 6 };
enum class Status : std::uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

struct Message {
  Kind kind = Kind::kRequest;
  Op op = Op::kNone;
  Status status = Status::kOk;
  std::uint32_t timeout_ms = 0;
  std::int64_t number = 0;
  std::vector<std::string> items{};
  std::string data{};
  std::string data2{};
};

std::string encode(const Message& m);
// Throws ProtocolError naming `peer` for a truncated, oversized or malformed message.
Message decode(std::string_view payload, const std::string& peer);

const char* op_name(Op op);

// Authentication: 32 random bytes (getrandom); the proofs each side sends; a constant-time compare.
std::string random_nonce();
std::string client_proof(std::string_view token, std::string_view server_nonce);
std::string server_proof(std::string_view token, std::string_view client_nonce);
bool proofs_equal(std::string_view a, std::string_view b);

}  // namespace hvrun::store

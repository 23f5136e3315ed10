#pragma once
// The few messages of Horovod's own services that an elastic driver exchanges with Horovod 0.28.1's
// workers (horovod/runner/common/util/network.py, horovod/runner/elastic/worker.py), in the only form
// they travel: Python pickles. Horovod unpickles anything it is sent; hvrun never does.
//
// Out, hvrun writes fixed templates (PingRequest, HostsUpdatedRequest). In, a strict reader builds inert
// data from a whitelist of opcodes: None, bools, ints, floats, str, bytes, lists, tuples, dicts, the
// memo, and a class reference only for the Horovod classes named below, which NEWOBJ, REDUCE and BUILD
// turn into plain records; no callable is ever looked up or called. Every other opcode (GLOBAL of
// anything else, INST, OBJ, PERSID, EXT*, BINUNICODE8, ...), a truncated or oversized pickle, bytes
// after STOP, a second reference through the memo to anything but a str, bytes, number or class, and
// invalid UTF-8 are ProtocolError naming the peer; so nothing decoded can be cyclic or blow up. Fuzzed: tests/fuzz/fuzz_horovod_pickle.cpp.
//
// Horovod's Wire frames each message as HMAC-SHA256(key, body) (32 bytes), the body's length as a
// 4-byte signed little-endian int (struct 'i' on x86-64 and aarch64), then the body; the key is the
// 32-byte secret each worker service publishes with its addresses (worker_addresses, below).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hvrun {

inline constexpr std::size_t kHorovodDigestSize = 32;   // secret.DIGEST_LENGTH
inline constexpr std::size_t kHorovodSecretSize = 32;   // secret.SECRET_LENGTH
inline constexpr std::size_t kHorovodHeaderSize = kHorovodDigestSize + 4;
// What hvrun reads. Horovod's messages are under 1 KiB; a worker's addresses on a host with hundreds of
// container veths stay under 16 KiB. The reader's memory is bounded by about 150 bytes per input byte.
inline constexpr std::size_t kHorovodMaxMessage = 64 * 1024;

// WorkerNotificationService.NAME: a PingResponse from a worker's notification service carries it.
inline constexpr std::string_view kWorkerNotificationService = "worker notification service";

// horovod.runner.elastic.worker.HostUpdateResult, an IntFlag.
enum class HorovodHostUpdate : int { kNoUpdate = 0, kRemoved = 1, kAdded = 2, kMixed = 3 };

// network.PingResponse: the service's name and the client address it saw (after any NAT).
struct HorovodPingResponse {
  std::string service_name;
  std::string source_address;
  bool operator==(const HorovodPingResponse&) const = default;
};
// network.AckResponse.
struct HorovodAck {
  bool operator==(const HorovodAck&) const = default;
};
using HorovodReply = std::variant<HorovodPingResponse, HorovodAck>;

// The value a worker PUTs under worker_addresses/HOST:LOCAL_RANK: its notification service's addresses
// by NIC name ({nic: [(ip, port), ...]}, in the worker's order) and the service's secret key.
struct HorovodWorkerAddresses {
  struct Address {
    std::string ip;
    int port = 0;  // 1..65535
    bool operator==(const Address&) const = default;
  };
  std::vector<std::pair<std::string, std::vector<Address>>> by_nic;
  std::string key;  // kHorovodSecretSize bytes
  bool operator==(const HorovodWorkerAddresses&) const = default;
};

// network.PingRequest(), pickled.
std::string pickle_ping_request();
// HostsUpdatedRequest(timestamp, HostUpdateResult(res)), pickled; `timestamp` in whole seconds since the
// epoch, as Horovod's driver sends it.
std::string pickle_hosts_updated(long long timestamp, HorovodHostUpdate res);

// A service's reply: PingResponse or AckResponse, nothing else.
HorovodReply unpickle_reply(std::string_view pickle, const std::string& peer);
// The pickled (addresses, key) tuple of a worker_addresses PUT (its body is base64 of this pickle:
// decode_worker_addresses_put).
HorovodWorkerAddresses unpickle_worker_addresses(std::string_view pickle, const std::string& peer);
// The body of a worker_addresses PUT: standard base64 (with padding) of that pickle.
HorovodWorkerAddresses decode_worker_addresses_put(std::string_view body, const std::string& peer);

// Wire.write: digest, length, body. `body` at most kHorovodMaxMessage bytes.
std::string seal_horovod_message(std::string_view key, std::string_view body);
// The body's length from the first kHorovodHeaderSize bytes of a message; ProtocolError when it is
// negative or over kHorovodMaxMessage.
std::size_t horovod_body_size(std::string_view header, const std::string& peer);
// Wire.read on a whole message (header and body): the body, once its digest under `key` is right;
// ProtocolError naming `peer` for a wrong digest, a wrong length or missing bytes.
std::string open_horovod_message(std::string_view key, std::string_view message, const std::string& peer);

}  // namespace hvrun

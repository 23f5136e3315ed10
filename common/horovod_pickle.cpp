#include "common/horovod_pickle.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <set>

#include "common/error.hpp"
#include "common/horovod_pickle_reader.hpp"

namespace hvrun {
namespace {

constexpr std::string_view kNetworkModule = "horovod.runner.common.util.network";
constexpr std::string_view kWorkerModule = "horovod.runner.elastic.worker";

// The classes a pickle may name: the ones hvrun sends and receives. Each stays a name; none is imported.
bool known_class(std::string_view module, std::string_view name) {
  if (module == kNetworkModule) return name == "PingRequest" || name == "PingResponse" || name == "AckResponse";
  if (module == kWorkerModule) return name == "HostsUpdatedRequest" || name == "HostUpdateResult";
  return false;
}

using Node = PickleNode;

// The typed views of what a PickleReader built.
class Shape {
 public:
  explicit Shape(const PickleReader& r) : r_(r) {}

  const Node& is(std::size_t i, Node::Kind kind, const std::string& what) const {
    const Node& n = r_.node(i);
    if (n.kind != kind) r_.fail(what + " is a " + Node::kind_name(n.kind) + ", not a " + Node::kind_name(kind));
    return n;
  }
  const Node& object(std::size_t i, std::string_view module, std::string_view name) const {
    const Node& o = is(i, Node::Kind::kObject, "the message");
    if (o.text != module || o.name != name) r_.fail("a " + o.text + "." + o.name + ", not a " + std::string(name));
    return o;
  }
  // The object's fields (BUILD's dict), exactly `names`, each a str.
  std::vector<std::string> str_fields(const Node& o, std::vector<std::string_view> names) const {
    if (!o.items.empty()) r_.fail(o.name + " with constructor arguments");
    std::vector<std::string> out(names.size());
    std::vector<bool> seen(names.size());
    const std::size_t n = o.state ? r_.node(*o.state).items.size() / 2 : 0;
    if (n != names.size()) r_.fail(o.name + " with " + std::to_string(n) + " fields, not " + std::to_string(names.size()));
    for (std::size_t k = 0; k < n; ++k) {
      const Node& d = r_.node(*o.state);
      const std::string& key = r_.node(d.items[2 * k]).text;
      std::size_t j = 0;
      while (j < names.size() && names[j] != key) ++j;
      if (j == names.size()) r_.fail(o.name + " with the field '" + key + "'");
      if (seen[j]) r_.fail(o.name + " with the field '" + key + "' twice");
      seen[j] = true;
      out[j] = is(d.items[2 * k + 1], Node::Kind::kStr, o.name + "." + key).text;
    }
    return out;
  }

 private:
  const PickleReader& r_;
};

void put_str(std::string& out, std::string_view s) {
  // SHORT_BINUNICODE: every string of the templates is shorter than 256 bytes.
  out += '\x8c';
  out += static_cast<char>(s.size());
  out += s;
}

std::string digest(std::string_view key, std::string_view body) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(body.data()),
           body.size(), out, &len) == nullptr)
    throw Error("HMAC-SHA256 failed for a Horovod message");
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

std::string pickle_ping_request() {
  std::string p = "\x80\x04";
  put_str(p, kNetworkModule);
  put_str(p, "PingRequest");
  p += "\x93)\x81.";  // STACK_GLOBAL, EMPTY_TUPLE, NEWOBJ, STOP
  return p;
}

std::string pickle_hosts_updated(long long timestamp, HorovodHostUpdate res) {
  std::string p = "\x80\x04";
  put_str(p, kWorkerModule);
  put_str(p, "HostsUpdatedRequest");
  p += "\x93)\x81}(";  // STACK_GLOBAL, EMPTY_TUPLE, NEWOBJ, EMPTY_DICT, MARK
  put_str(p, "timestamp");
  p += "\x8a\x08";  // LONG1 of 8 bytes
  auto u = static_cast<std::uint64_t>(timestamp);
  for (int k = 0; k < 8; ++k, u >>= 8) p += static_cast<char>(u & 0xff);
  put_str(p, "res");
  put_str(p, kWorkerModule);
  put_str(p, "HostUpdateResult");
  p += '\x93';  // STACK_GLOBAL
  p += 'K';     // BININT1
  p += static_cast<char>(static_cast<int>(res));
  p += "\x85R";  // TUPLE1, REDUCE: HostUpdateResult(res)
  p += "ub.";    // SETITEMS, BUILD, STOP
  return p;
}

HorovodReply unpickle_reply(std::string_view pickle, const std::string& peer) {
  PickleReader r(pickle, peer, known_class);
  const std::size_t top = r.run();
  const Shape s(r);
  const Node& o = s.is(top, Node::Kind::kObject, "the reply");
  if (o.text == kNetworkModule && o.name == "AckResponse") {
    s.str_fields(o, {});
    return HorovodAck{};
  }
  s.object(top, kNetworkModule, "PingResponse");
  auto f = s.str_fields(o, {"service_name", "source_address"});
  return HorovodPingResponse{std::move(f[0]), std::move(f[1])};
}

HorovodWorkerAddresses unpickle_worker_addresses(std::string_view pickle, const std::string& peer) {
  PickleReader r(pickle, peer, known_class);
  const std::size_t top = r.run();
  const Shape s(r);
  const Node& pair = s.is(top, Node::Kind::kTuple, "worker_addresses");
  if (pair.items.size() != 2) r.fail("worker_addresses of " + std::to_string(pair.items.size()) + " values, not 2");
  HorovodWorkerAddresses out;
  const Node& by_nic = s.is(pair.items[0], Node::Kind::kDict, "the addresses");
  std::set<std::string_view> nics;
  for (std::size_t k = 0; k < by_nic.items.size(); k += 2) {
    const std::string& nic = std::as_const(r).node(by_nic.items[k]).text;
    if (!nics.insert(nic).second) r.fail("the addresses of " + nic + " twice");
    std::vector<HorovodWorkerAddresses::Address> addresses;
    for (std::size_t a : s.is(by_nic.items[k + 1], Node::Kind::kList, "the addresses of " + nic).items) {
      const Node& ip_port = s.is(a, Node::Kind::kTuple, "an address of " + nic);
      if (ip_port.items.size() != 2) r.fail("an address of " + nic + " that is not (ip, port)");
      const std::string& ip = s.is(ip_port.items[0], Node::Kind::kStr, "an address of " + nic).text;
      const std::int64_t port = s.is(ip_port.items[1], Node::Kind::kInt, "a port of " + nic).number;
      if (port < 1 || port > 65535) r.fail("port " + std::to_string(port) + " of " + nic);
      addresses.push_back({ip, static_cast<int>(port)});
    }
    out.by_nic.emplace_back(nic, std::move(addresses));
  }
  out.key = s.is(pair.items[1], Node::Kind::kBytes, "the secret key").text;
  if (out.key.size() != kHorovodSecretSize)
    r.fail("a secret key of " + std::to_string(out.key.size()) + " bytes, not " + std::to_string(kHorovodSecretSize));
  return out;
}

HorovodWorkerAddresses decode_worker_addresses_put(std::string_view body, const std::string& peer) {
  if (body.size() % 4 != 0 || body.size() > kHorovodMaxMessage * 2)
    throw ProtocolError(peer + ": a worker_addresses body that is not base64 (" + std::to_string(body.size()) + " bytes)");
  std::string raw(body.size() / 4 * 3, '\0');
  const int n = body.empty() ? 0
                             : EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                                               reinterpret_cast<const unsigned char*>(body.data()),
                                               static_cast<int>(body.size()));
  if (n < 0) throw ProtocolError(peer + ": a worker_addresses body that is not base64");
  // EVP_DecodeBlock counts the padding's bytes as data.
  std::size_t size = static_cast<std::size_t>(n);
  for (std::size_t k = body.size(); k > 0 && body[k - 1] == '=' && size > 0; --k) --size;
  raw.resize(size);
  return unpickle_worker_addresses(raw, peer);
}

std::string seal_horovod_message(std::string_view key, std::string_view body) {
  if (body.size() > kHorovodMaxMessage) throw Error("a Horovod message of " + std::to_string(body.size()) + " bytes");
  std::string out = digest(key, body);
  auto n = static_cast<std::uint32_t>(body.size());
  for (int k = 0; k < 4; ++k, n >>= 8) out += static_cast<char>(n & 0xff);
  out += body;
  return out;
}

std::size_t horovod_body_size(std::string_view header, const std::string& peer) {
  if (header.size() < kHorovodHeaderSize)
    throw ProtocolError(peer + ": a Horovod message shorter than its " + std::to_string(kHorovodHeaderSize) +
                        "-byte header");
  std::uint32_t u = 0;
  for (std::size_t k = kHorovodHeaderSize; k-- > kHorovodDigestSize;) u = u << 8 | static_cast<unsigned char>(header[k]);
  const auto n = static_cast<std::int32_t>(u);
  if (n < 0 || static_cast<std::size_t>(n) > kHorovodMaxMessage)
    throw ProtocolError(peer + ": a Horovod message that says it holds " + std::to_string(n) + " bytes");
  return static_cast<std::size_t>(n);
}

std::string open_horovod_message(std::string_view key, std::string_view message, const std::string& peer) {
  const std::size_t n = horovod_body_size(message, peer);
  if (message.size() != kHorovodHeaderSize + n)
    throw ProtocolError(peer + ": a Horovod message of " + std::to_string(message.size()) + " bytes whose header says " +
                        std::to_string(kHorovodHeaderSize + n));
  const std::string_view body = message.substr(kHorovodHeaderSize);
  const std::string expected = digest(key, body);
  if (CRYPTO_memcmp(expected.data(), message.data(), kHorovodDigestSize) != 0)
    throw ProtocolError(peer + ": a Horovod message whose digest does not match its body (another job's key?)");
  return std::string(body);
}

}  // namespace hvrun

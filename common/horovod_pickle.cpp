#include "common/horovod_pickle.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>

#include "common/error.hpp"

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

// One value the reader built. The stack and the memo hold indices into the reader's arena, so that an
// APPEND to a list reached through the memo changes that list, as in Python, and no value is copied.
struct Node {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kClass, kObject };
  Kind kind = Kind::kNone;
  std::int64_t number = 0;      // kBool, kInt
  double real = 0;              // kFloat
  std::string text;             // kStr, kBytes; kClass and kObject: the module
  std::string name;             // kClass, kObject: the class name
  std::vector<std::size_t> items;  // kList, kTuple; kDict: key, value, key, value...; kObject: its arguments
  std::optional<std::size_t> state;  // kObject: the dict BUILD gave it
};

Node make(Node::Kind kind, std::int64_t number = 0) {
  Node n;
  n.kind = kind;
  n.number = number;
  return n;
}

const char* kind_name(Node::Kind k) {
  switch (k) {
    case Node::Kind::kNone: return "None";
    case Node::Kind::kBool: return "bool";
    case Node::Kind::kInt: return "int";
    case Node::Kind::kFloat: return "float";
    case Node::Kind::kStr: return "str";
    case Node::Kind::kBytes: return "bytes";
    case Node::Kind::kList: return "list";
    case Node::Kind::kTuple: return "tuple";
    case Node::Kind::kDict: return "dict";
    case Node::Kind::kClass: return "class";
    case Node::Kind::kObject: return "object";
  }
  return "?";
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // its continuation bytes are missing
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

class PickleReader {
 public:
  PickleReader(std::string_view in, const std::string& peer) : in_(in), peer_(peer) {}

  // Runs the pickle to its STOP; the index of the one value left.
  std::size_t run() {
    if (in_.size() > kHorovodMaxMessage) fail("a pickle of " + std::to_string(in_.size()) + " bytes, over hvrun's limit");
    for (;;) {
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(take(1)[0]);
      switch (op) {
        case 0x80: {  // PROTO
          const auto v = static_cast<unsigned char>(take(1)[0]);
          if (at != 0 || v < 2 || v > 5) fail_at(at, "PROTO " + std::to_string(v));
          break;
        }
        case 0x95: take(8); break;  // FRAME: a hint for buffered readers; the whole pickle is here
        case '.': {                 // STOP
          if (stack_.size() != 1 || !marks_.empty()) fail_at(at, "STOP with " + std::to_string(stack_.size()) + " values left");
          if (pos_ != in_.size()) fail_at(pos_, std::to_string(in_.size() - pos_) + " bytes after STOP");
          return stack_.back();
        }
        case 'N': push(make(Node::Kind::kNone)); break;
        case 0x88: push(make(Node::Kind::kBool, 1)); break;
        case 0x89: push(make(Node::Kind::kBool, 0)); break;
        case 'J': push(integer(static_cast<std::int32_t>(little(take(4))))); break;
        case 'K': push(integer(static_cast<std::int64_t>(little(take(1))))); break;
        case 'M': push(integer(static_cast<std::int64_t>(little(take(2))))); break;
        case 0x8a: {  // LONG1: n little-endian two's-complement bytes
          const auto n = static_cast<unsigned char>(take(1)[0]);
          if (n > 8) fail_at(at, "an int of " + std::to_string(n) + " bytes");
          const std::string_view b = take(n);
          std::uint64_t u = little(b);
          if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80)) u |= ~std::uint64_t{0} << (8 * n);
          push(integer(static_cast<std::int64_t>(u)));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          const std::string_view b = take(8);
          std::uint64_t u = 0;
          for (char c : b) u = u << 8 | static_cast<unsigned char>(c);
          Node n = make(Node::Kind::kFloat);
          n.real = std::bit_cast<double>(u);
          push(std::move(n));
          break;
        }
        case 'X': str(at, take(length(4))); break;
        case 0x8c: str(at, take(length(1))); break;
        case 'B': bytes(take(length(4))); break;
        case 'C': bytes(take(length(1))); break;
        case ']': push(make(Node::Kind::kList)); break;
        case ')': push(make(Node::Kind::kTuple)); break;
        case '}': push(make(Node::Kind::kDict)); break;
        case '(': marks_.push_back(stack_.size()); break;
        case 'a': {  // APPEND
          const std::size_t v = pop(at);
          container(at, Node::Kind::kList).items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<std::size_t> vs = pop_mark(at);
          Node& list = container(at, Node::Kind::kList);
          list.items.insert(list.items.end(), vs.begin(), vs.end());
          break;
        }
        case 's': {  // SETITEM
          const std::size_t v = pop(at), k = pop(at);
          set_items(at, {k, v});
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<std::size_t> kv = pop_mark(at);
          if (kv.size() % 2 != 0) fail_at(at, "SETITEMS with an odd number of values");
          set_items(at, kv);
          break;
        }
        case 't': tuple(pop_mark(at)); break;
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          std::vector<std::size_t> vs(op - 0x84);
          for (std::size_t k = vs.size(); k-- > 0;) vs[k] = pop(at);
          tuple(std::move(vs));
          break;
        }
        case 0x94: memo_.push_back(top(at)); break;  // MEMOIZE
        case 'q': put(at, little(take(1))); break;   // BINPUT
        case 'r': put(at, little(take(4))); break;   // LONG_BINPUT
        case 'h': get(at, little(take(1))); break;   // BINGET
        case 'j': get(at, little(take(4))); break;   // LONG_BINGET
        case 0x93: {                                 // STACK_GLOBAL: a class name, never looked up
          const Node& name = node(pop(at));
          const Node& module = node(pop(at));
          if (module.kind != Node::Kind::kStr || name.kind != Node::Kind::kStr)
            fail_at(at, "STACK_GLOBAL of a " + std::string(kind_name(module.kind)) + " and a " + kind_name(name.kind));
          if (!known_class(module.text, name.text))
            fail_at(at, "a reference to " + module.text + "." + name.text + ", which no Horovod message holds");
          Node c = make(Node::Kind::kClass);
          c.text = module.text;
          c.name = name.text;
          push(std::move(c));
          break;
        }
        case 0x81: case 'R': {  // NEWOBJ, REDUCE: an instance of a known class, as a record
          const std::size_t args = pop(at), cls = pop(at);
          if (node(cls).kind != Node::Kind::kClass || node(args).kind != Node::Kind::kTuple)
            fail_at(at, "an instance made from a " + std::string(kind_name(node(cls).kind)) + " and a " +
                            kind_name(node(args).kind));
          Node o = make(Node::Kind::kObject);
          o.text = node(cls).text;
          o.name = node(cls).name;
          o.items = node(args).items;
          push(std::move(o));
          break;
        }
        case 'b': {  // BUILD: the instance's __dict__
          const std::size_t state = pop(at);
          Node& o = node(top(at));
          if (o.kind != Node::Kind::kObject || o.state || node(state).kind != Node::Kind::kDict)
            fail_at(at, "BUILD of a " + std::string(kind_name(o.kind)) + " with a " + kind_name(node(state).kind));
          o.state = state;
          break;
        }
        default: {
          static constexpr char kHex[] = "0123456789abcdef";
          fail_at(at, std::string("opcode 0x") + kHex[op >> 4] + kHex[op & 15] + ", which hvrun does not read");
        }
      }
    }
  }

  const Node& node(std::size_t i) const { return arena_.at(i); }

  [[noreturn]] void fail(const std::string& what) const {
    throw ProtocolError(peer_ + ": a Horovod message hvrun refuses: " + what);
  }

 private:
  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const {
    fail(what + " at byte " + std::to_string(at));
  }
  Node& node(std::size_t i) { return arena_.at(i); }

  std::string_view take(std::size_t n) {
    if (n > in_.size() - pos_) fail("the pickle ends " + std::to_string(n - (in_.size() - pos_)) + " bytes short of its last opcode");
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  static std::uint64_t little(std::string_view b) {
    std::uint64_t u = 0;
    for (std::size_t k = b.size(); k-- > 0;) u = u << 8 | static_cast<unsigned char>(b[k]);
    return u;
  }
  std::size_t length(std::size_t width) {
    const std::uint64_t n = little(take(width));
    if (n > in_.size()) fail("a length of " + std::to_string(n) + " bytes in a pickle of " + std::to_string(in_.size()));
    return static_cast<std::size_t>(n);
  }
  static Node integer(std::int64_t v) {
    Node n = make(Node::Kind::kInt);
    n.number = v;
    return n;
  }
  void str(std::size_t at, std::string_view s) {
    if (!valid_utf8(s)) fail_at(at, "a str that is not UTF-8");
    Node n = make(Node::Kind::kStr);
    n.text = s;
    push(std::move(n));
  }
  void bytes(std::string_view s) {
    Node n = make(Node::Kind::kBytes);
    n.text = s;
    push(std::move(n));
  }
  void tuple(std::vector<std::size_t> items) {
    Node n = make(Node::Kind::kTuple);
    n.items = std::move(items);
    push(std::move(n));
  }
  void push(Node n) {
    arena_.push_back(std::move(n));
    stack_.push_back(arena_.size() - 1);
  }
  std::size_t pop(std::size_t at) {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) fail_at(at, "an opcode with too few values");
    const std::size_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::size_t top(std::size_t at) {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) fail_at(at, "an opcode with no value");
    return stack_.back();
  }
  std::vector<std::size_t> pop_mark(std::size_t at) {
    if (marks_.empty()) fail_at(at, "an opcode without its MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<std::size_t> vs(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return vs;
  }
  Node& container(std::size_t at, Node::Kind kind) {
    Node& c = node(top(at));
    if (c.kind != kind) fail_at(at, std::string("adding to a ") + kind_name(c.kind) + ", not a " + kind_name(kind));
    return c;
  }
  void set_items(std::size_t at, const std::vector<std::size_t>& kv) {
    Node& d = container(at, Node::Kind::kDict);
    for (std::size_t k = 0; k < kv.size(); k += 2) {
      const Node& key = node(kv[k]);
      if (key.kind != Node::Kind::kStr) fail_at(at, std::string("a dict key that is a ") + kind_name(key.kind));
      // A repeated key is refused by the typed readers, which know their few keys.
      d.items.push_back(kv[k]);
      d.items.push_back(kv[k + 1]);
    }
  }
  void put(std::size_t at, std::uint64_t slot) {
    if (slot != memo_.size()) fail_at(at, "a memo slot out of order");  // pickle writes them in order
    memo_.push_back(top(at));
  }
  void get(std::size_t at, std::uint64_t slot) {
    if (slot >= memo_.size()) fail_at(at, "memo slot " + std::to_string(slot) + ", never stored");
    const Node::Kind k = node(memo_[slot]).kind;
    // A second reference to a mutable value would let the pickle change a value already placed, or
    // place a value inside itself; Horovod's messages share only strings and classes.
    if (k == Node::Kind::kList || k == Node::Kind::kDict || k == Node::Kind::kObject || k == Node::Kind::kTuple)
      fail_at(at, std::string("a second reference to a ") + kind_name(k));
    stack_.push_back(memo_[slot]);
  }

  std::string_view in_;
  const std::string& peer_;
  std::size_t pos_ = 0;
  std::vector<Node> arena_;
  std::vector<std::size_t> stack_;
  std::vector<std::size_t> marks_;
  std::vector<std::size_t> memo_;
};

// The typed views of what a PickleReader built.
class Shape {
 public:
  explicit Shape(const PickleReader& r) : r_(r) {}

  const Node& is(std::size_t i, Node::Kind kind, const std::string& what) const {
    const Node& n = r_.node(i);
    if (n.kind != kind) r_.fail(what + " is a " + kind_name(n.kind) + ", not a " + kind_name(kind));
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
  PickleReader r(pickle, peer);
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
  PickleReader r(pickle, peer);
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

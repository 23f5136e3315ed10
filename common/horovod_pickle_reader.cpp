#include "common/horovod_pickle_reader.hpp"

#include <bit>

#include "common/error.hpp"
#include "common/horovod_pickle.hpp"

namespace hvrun {
namespace {

using Node = PickleNode;

Node make(Node::Kind kind, std::int64_t number = 0) {
  Node n;
  n.kind = kind;
  n.number = number;
  return n;
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

}  // namespace

const char* PickleNode::kind_name(Kind k) {
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

std::size_t PickleReader::run() {
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
          fail_at(at, "STACK_GLOBAL of a " + std::string(Node::kind_name(module.kind)) + " and a " +
                          Node::kind_name(name.kind));
        if (!known_class_(module.text, name.text))
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
          fail_at(at, "an instance made from a " + std::string(Node::kind_name(node(cls).kind)) + " and a " +
                          Node::kind_name(node(args).kind));
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
          fail_at(at, "BUILD of a " + std::string(Node::kind_name(o.kind)) + " with a " +
                          Node::kind_name(node(state).kind));
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

void PickleReader::fail(const std::string& what) const {
  throw ProtocolError(peer_ + ": a Horovod message hvrun refuses: " + what);
}

void PickleReader::fail_at(std::size_t at, const std::string& what) const {
  fail(what + " at byte " + std::to_string(at));
}

std::string_view PickleReader::take(std::size_t n) {
  if (n > in_.size() - pos_) fail("the pickle ends " + std::to_string(n - (in_.size() - pos_)) + " bytes short of its last opcode");
  const std::string_view s = in_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::uint64_t PickleReader::little(std::string_view b) {
  std::uint64_t u = 0;
  for (std::size_t k = b.size(); k-- > 0;) u = u << 8 | static_cast<unsigned char>(b[k]);
  return u;
}

std::size_t PickleReader::length(std::size_t width) {
  const std::uint64_t n = little(take(width));
  if (n > in_.size()) fail("a length of " + std::to_string(n) + " bytes in a pickle of " + std::to_string(in_.size()));
  return static_cast<std::size_t>(n);
}

PickleNode PickleReader::integer(std::int64_t v) {
  Node n = make(Node::Kind::kInt);
  n.number = v;
  return n;
}

void PickleReader::str(std::size_t at, std::string_view s) {
  if (!valid_utf8(s)) fail_at(at, "a str that is not UTF-8");
  Node n = make(Node::Kind::kStr);
  n.text = s;
  push(std::move(n));
}

void PickleReader::bytes(std::string_view s) {
  Node n = make(Node::Kind::kBytes);
  n.text = s;
  push(std::move(n));
}

void PickleReader::tuple(std::vector<std::size_t> items) {
  Node n = make(Node::Kind::kTuple);
  n.items = std::move(items);
  push(std::move(n));
}

void PickleReader::push(Node n) {
  arena_.push_back(std::move(n));
  stack_.push_back(arena_.size() - 1);
}

std::size_t PickleReader::pop(std::size_t at) {
  if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) fail_at(at, "an opcode with too few values");
  const std::size_t v = stack_.back();
  stack_.pop_back();
  return v;
}

std::size_t PickleReader::top(std::size_t at) {
  if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) fail_at(at, "an opcode with no value");
  return stack_.back();
}

std::vector<std::size_t> PickleReader::pop_mark(std::size_t at) {
  if (marks_.empty()) fail_at(at, "an opcode without its MARK");
  const std::size_t m = marks_.back();
  marks_.pop_back();
  std::vector<std::size_t> vs(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
  stack_.resize(m);
  return vs;
}

PickleNode& PickleReader::container(std::size_t at, Node::Kind kind) {
  Node& c = node(top(at));
  if (c.kind != kind)
    fail_at(at, std::string("adding to a ") + Node::kind_name(c.kind) + ", not a " + Node::kind_name(kind));
  return c;
}

void PickleReader::set_items(std::size_t at, const std::vector<std::size_t>& kv) {
  Node& d = container(at, Node::Kind::kDict);
  for (std::size_t k = 0; k < kv.size(); k += 2) {
    const Node& key = node(kv[k]);
    if (key.kind != Node::Kind::kStr) fail_at(at, std::string("a dict key that is a ") + Node::kind_name(key.kind));
    // A repeated key is refused by the typed readers, which know their few keys.
    d.items.push_back(kv[k]);
    d.items.push_back(kv[k + 1]);
  }
}

void PickleReader::put(std::size_t at, std::uint64_t slot) {
  if (slot != memo_.size()) fail_at(at, "a memo slot out of order");  // pickle writes them in order
  memo_.push_back(top(at));
}

void PickleReader::get(std::size_t at, std::uint64_t slot) {
  if (slot >= memo_.size()) fail_at(at, "memo slot " + std::to_string(slot) + ", never stored");
  const Node::Kind k = node(memo_[slot]).kind;
  // A second reference to a mutable value would let the pickle change a value already placed, or
  // place a value inside itself; Horovod's messages share only strings and classes.
  if (k == Node::Kind::kList || k == Node::Kind::kDict || k == Node::Kind::kObject || k == Node::Kind::kTuple)
    fail_at(at, std::string("a second reference to a ") + Node::kind_name(k));
  stack_.push_back(memo_[slot]);
}

}  // namespace hvrun

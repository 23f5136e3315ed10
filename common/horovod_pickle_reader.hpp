#pragma once
// The strict pickle reader under horovod_pickle.hpp, whose header states what it accepts and why: it runs
// a pickle's opcodes into inert values (PickleNode), from a whitelist of opcodes, and refuses everything
// else with a ProtocolError naming the peer. No callable is ever looked up or called: a class reference
// stays a name, and only a class that the caller's filter knows may be named at all. What the values
// mean (which object, which fields) is the caller's to check.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

// One value the reader built. The stack and the memo hold indices into the reader's arena, so that an
// APPEND to a list reached through the memo changes that list, as in Python, and no value is copied.
struct PickleNode {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kClass, kObject };
  Kind kind = Kind::kNone;
  std::int64_t number = 0;      // kBool, kInt
  double real = 0;              // kFloat
  std::string text;             // kStr, kBytes; kClass and kObject: the module
  std::string name;             // kClass, kObject: the class name
  std::vector<std::size_t> items;  // kList, kTuple; kDict: key, value, key, value...; kObject: its arguments
  std::optional<std::size_t> state;  // kObject: the dict BUILD gave it

  static const char* kind_name(Kind k);  // "None", "int", "dict", ...: for the refusals' words
};

class PickleReader {
 public:
  // Whether a class reference (STACK_GLOBAL) may name `module`.`name`.
  using ClassFilter = bool (*)(std::string_view module, std::string_view name);

  // `in` and `peer` must outlive the reader.
  PickleReader(std::string_view in, const std::string& peer, ClassFilter known_class)
      : in_(in), peer_(peer), known_class_(known_class) {}

  // Runs the pickle to its STOP; the index of the one value left.
  std::size_t run();

  const PickleNode& node(std::size_t i) const { return arena_.at(i); }

  // A ProtocolError naming the peer: the pickle is refused for `what`.
  [[noreturn]] void fail(const std::string& what) const;

 private:
  using Node = PickleNode;

  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const;
  Node& node(std::size_t i) { return arena_.at(i); }

  std::string_view take(std::size_t n);
  static std::uint64_t little(std::string_view b);
  std::size_t length(std::size_t width);
  static Node integer(std::int64_t v);
  void str(std::size_t at, std::string_view s);
  void bytes(std::string_view s);
  void tuple(std::vector<std::size_t> items);
  void push(Node n);
  std::size_t pop(std::size_t at);
  std::size_t top(std::size_t at);
  std::vector<std::size_t> pop_mark(std::size_t at);
  Node& container(std::size_t at, Node::Kind kind);
  void set_items(std::size_t at, const std::vector<std::size_t>& kv);
  void put(std::size_t at, std::uint64_t slot);
  void get(std::size_t at, std::uint64_t slot);

  std::string_view in_;
  const std::string& peer_;
  ClassFilter known_class_;
  std::size_t pos_ = 0;
  std::vector<Node> arena_;
  std::vector<std::size_t> stack_;
  std::vector<std::size_t> marks_;
  std::vector<std::size_t> memo_;
};

}  // namespace hvrun

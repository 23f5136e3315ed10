#pragma once
// The last bytes of a stream, bounded: what a command wrote to stderr before it failed, quoted in the
// error message without holding more than `limit` bytes however much it writes.
#include <cstddef>
#include <string>
#include <string_view>

namespace hvrun {

class ByteTail {
 public:
  explicit ByteTail(std::size_t limit) : limit_(limit) {}

  // Appends `bytes`, then drops the oldest bytes beyond the limit.
  void append(std::string_view bytes);
  const std::string& text() const { return text_; }

 private:
  std::size_t limit_;
  std::string text_;
};

}  // namespace hvrun

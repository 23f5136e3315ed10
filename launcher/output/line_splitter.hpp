#pragma once
// Cuts one output stream into lines as a terminal user sees them: '\n' and '\r' both end a line
// ("\r\n" counts once) so progress bars become lines; a line longer than max_line is cut into pieces
// of max_line bytes so that memory stays bounded. Bytes are passed through unchanged.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace hvrun {

class LineSplitter {
 public:
  using LineHandler = std::function<void(std::string_view line)>;  // without its terminator

  explicit LineSplitter(std::size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  void feed(std::string_view bytes, const LineHandler& emit);
  // End of stream: a pending partial line is emitted as a line.
  void flush(const LineHandler& emit);
  bool has_partial() const { return !partial_.empty(); }

  static constexpr std::size_t kDefaultMaxLine = 64 * 1024;

 private:
  std::size_t max_line_;
  std::string partial_;
  bool after_cr_ = false;  // the previous byte was '\r': a following '\n' ends nothing new
};

}  // namespace hvrun

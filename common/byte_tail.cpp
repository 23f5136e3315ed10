#include "common/byte_tail.hpp"

namespace hvrun {

void ByteTail::append(std::string_view bytes) {
  if (bytes.size() >= limit_) {
    text_.assign(bytes.substr(bytes.size() - limit_));
    return;
  }
  text_.append(bytes);
  if (text_.size() > limit_) text_.erase(0, text_.size() - limit_);
}

}  // namespace hvrun

#include "launcher/output/line_splitter.hpp"

namespace hvrun {

void LineSplitter::feed(std::string_view bytes, const LineHandler& emit) {
  for (char c : bytes) {
    const bool skip = after_cr_ && c == '\n';
    after_cr_ = c == '\r';
    if (skip) continue;
    if (c == '\n' || c == '\r') {
      emit(partial_);
      partial_.clear();
      continue;
    }
    partial_.push_back(c);
    if (partial_.size() >= max_line_) {
      emit(partial_);
      partial_.clear();
    }
  }
}

void LineSplitter::flush(const LineHandler& emit) {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
  after_cr_ = false;
}

}  // namespace hvrun

#include "agent/rank_pipes.hpp"

#include <boost/asio/io_context.hpp>

namespace hvrun {

RankPipes::RankPipes(boost::asio::io_context& io, int out, int err)
    : out_(std::make_unique<Descriptor>(io, out)), err_(std::make_unique<Descriptor>(io, err)) {}

RankPipes::Descriptor* RankPipes::open(OutputStream stream) {
  auto& d = stream == OutputStream::kStdout ? out_ : err_;
  return d && d->is_open() ? d.get() : nullptr;
}

std::string_view RankPipes::pass(OutputStream stream, std::string_view bytes) {
  if (stream == OutputStream::kStdout) return bytes;
  passed_ = err_text_.feed(bytes);
  return passed_;
}

std::string RankPipes::close(OutputStream stream) {
  if (Descriptor* d = open(stream)) {
    boost::system::error_code ignored;
    d->close(ignored);
  }
  return stream == OutputStream::kStderr ? err_text_.flush() : std::string();
}

}  // namespace hvrun

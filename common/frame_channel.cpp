#include "common/frame_channel.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <vector>

#include "common/error.hpp"

namespace hvrun {

namespace asio = boost::asio;

namespace {
// One write takes at most this many queued frames (writev's IOV_MAX is 1024) and bytes.
constexpr std::size_t kMaxBatchFrames = 64;
constexpr std::size_t kMaxBatchBytes = 256 * 1024;
}  // namespace

struct FrameChannel::Impl : std::enable_shared_from_this<FrameChannel::Impl> {
  Impl(asio::io_context& io, UniqueFd r, UniqueFd w, std::string p)
      : reader(io, r.release()), writer(io, w.release()), decoder(p), peer(std::move(p)) {}

  asio::posix::stream_descriptor reader;
  asio::posix::stream_descriptor writer;
  FrameDecoder decoder;
  std::string peer;
  Handlers handlers;
  std::deque<std::string> queue;
  std::size_t queued = 0;
  bool writing = false;
  bool was_congested = false;
  bool closed = false;
  std::vector<std::function<void()>> flush_waiters;
  // Not zeroed: only the n bytes a read filled are ever looked at, and zeroing 64 KiB per channel
  // faulted in 16 pages in every agent and per host in the launcher before a byte arrived.
  std::array<char, kIoChunk> buffer;

  void read_more() {
    reader.async_read_some(asio::buffer(buffer), [self = shared_from_this()](auto ec, std::size_t n) {
      if (self->closed) return;
      if (ec) {
        if (ec == asio::error::eof) {
          try {
            self->decoder.finish();
          } catch (const Error& e) {
            return self->fail(e.what());
          }
          return self->fail("");
        }
        return self->fail(self->peer + ": read failed: " + ec.message());
      }
      try {
        self->decoder.feed(std::string_view(self->buffer.data(), n));
        while (auto frame = self->decoder.next()) {
          self->handlers.on_frame(std::move(*frame));
          if (self->closed) return;
        }
      } catch (const Error& e) {
        return self->fail(e.what());
      }
      self->read_more();
    });
  }

  void write_more() {
    if (writing || closed) return;
    if (queue.empty()) {
      auto waiters = std::exchange(flush_waiters, {});
      for (auto& w : waiters) w();
      return;
    }
    // Every frame queued so far in one write: a burst of small frames (probe results, output lines)
    // costs one system call here and one SSH packet on the way, not one per frame. The deque keeps
    // the strings in place while frames are added behind them.
    std::vector<asio::const_buffer> batch;
    std::size_t batch_bytes = 0;
    for (const std::string& frame : queue) {
      if (batch.size() == kMaxBatchFrames || (!batch.empty() && batch_bytes + frame.size() > kMaxBatchBytes)) break;
      batch.push_back(asio::buffer(frame));
      batch_bytes += frame.size();
    }
    writing = true;
    asio::async_write(writer, batch, [self = shared_from_this(), frames = batch.size()](auto ec, std::size_t) {
      self->writing = false;
      if (self->closed) return;
      if (ec) return self->fail(self->peer + ": write failed: " + ec.message());
      for (std::size_t i = 0; i < frames; ++i) {
        self->queued -= self->queue.front().size();
        self->queue.pop_front();
      }
      if (self->was_congested && self->queued < kQueueLowWater) {
        self->was_congested = false;
        if (self->handlers.on_drained) self->handlers.on_drained();
        if (self->closed) return;
      }
      self->write_more();
    });
  }

  void fail(const std::string& error) {
    if (closed) return;
    shutdown();
    if (handlers.on_closed) handlers.on_closed(error);
  }

  void shutdown() {
    closed = true;
    boost::system::error_code ignored;
    reader.close(ignored);
    writer.close(ignored);
    queue.clear();
    queued = 0;
    flush_waiters.clear();
  }
};

FrameChannel::FrameChannel(asio::io_context& io, UniqueFd read_fd, UniqueFd write_fd, std::string peer)
    : impl_(std::make_shared<Impl>(io, std::move(read_fd), std::move(write_fd), std::move(peer))) {}

FrameChannel::~FrameChannel() { close(); }

void FrameChannel::start(Handlers handlers) {
  impl_->handlers = std::move(handlers);
  impl_->read_more();
}

void FrameChannel::send(FrameType type, std::string_view payload) {
  if (impl_->closed) return;
  impl_->queue.push_back(encode_frame(type, payload));
  impl_->queued += impl_->queue.back().size();
  if (impl_->queued >= kQueueHighWater) impl_->was_congested = true;
  impl_->write_more();
}

std::size_t FrameChannel::queued_bytes() const { return impl_->queued; }

void FrameChannel::flush(std::function<void()> done) {
  if (impl_->closed || (impl_->queue.empty() && !impl_->writing)) return done();
  impl_->flush_waiters.push_back(std::move(done));
}

void FrameChannel::close() {
  if (impl_ && !impl_->closed) impl_->shutdown();
}

const std::string& FrameChannel::peer() const { return impl_->peer; }

}  // namespace hvrun

#pragma once
// A framed, bidirectional byte stream on file descriptors, driven by a Boost.Asio io_context:
// the agent's stdin/stdout, or the launcher's end of a socketpair to an agent.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/frame_codec.hpp"
#include "common/io_sizes.hpp"
#include "common/unique_fd.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class FrameChannel {
 public:
  struct Handlers {
    std::function<void(Frame&&)> on_frame;
    // Called once: an empty string for a clean end of stream, else what went wrong (names the peer).
    std::function<void(const std::string& error)> on_closed;
    // Called when the send queue drops below kQueueLowWater after having reached kQueueHighWater.
    std::function<void()> on_drained;
  };

  // Takes ownership of both descriptors (they may be dups of one socket). `peer` names the other
  // side in every error ("agent on host b").
  FrameChannel(boost::asio::io_context& io, UniqueFd read_fd, UniqueFd write_fd, std::string peer);
  ~FrameChannel();
  FrameChannel(const FrameChannel&) = delete;
  FrameChannel& operator=(const FrameChannel&) = delete;

  void start(Handlers handlers);
  // Queues one frame; never blocks. A write error closes the channel through on_closed.
  void send(FrameType type, std::string_view payload);
  // Bytes queued but not yet written; senders stop producing while it is above kQueueHighWater
  // (common/io_sizes.hpp).
  std::size_t queued_bytes() const;
  bool congested() const { return queued_bytes() >= kQueueHighWater; }
  // Runs `done` once everything queued has been written (at once if nothing is queued).
  void flush(std::function<void()> done);
  // Stops reading and writing and closes both descriptors; no handler runs afterwards.
  void close();
  const std::string& peer() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hvrun

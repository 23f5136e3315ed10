#pragma once
// Writes rank output to hvrun's stdout, stderr and output files on a thread of its own, so a terminal
// or pipe that reads slowly (a paused pager, `| less`) never stalls the launcher's event loop: its
// heartbeats, watchdogs and signals keep working while output waits.
//
// Memory stays bounded by flow control, never by dropping: the launcher acknowledges rank output to
// each agent only while this queue is below its high-water mark, and an agent with a window of
// unacknowledged output stops reading its ranks' pipes, so the ranks block in write() (back-pressure).
// Nothing is dropped unless the reader of a stream went away (EPIPE) or the writer is destroyed with
// output still queued (the user stopped hvrun while its output could not be written).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/io_sizes.hpp"

namespace hvrun {

class OutputWriter {
 public:
  // `on_relieved` runs on the writer's thread each time the queue falls below kQueueLowWater after
  // having reached kQueueHighWater (common/io_sizes.hpp).
  explicit OutputWriter(std::function<void()> on_relieved = {});
  // Stops the thread within its poll interval; output still queued is abandoned.
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  // Queues `bytes` for `fd`; never blocks. Writes to one fd keep their order, and a chunk of at most
  // PIPE_BUF bytes reaches a pipe in one write, so whole lines never interleave with other writers.
  void write(int fd, std::string bytes);
  std::size_t queued_bytes() const;
  bool congested() const { return queued_bytes() >= kQueueHighWater; }
  // Waits until everything queued so far is written or `timeout` passes; true when it was written.
  bool drain(std::chrono::milliseconds timeout);
  // Runs `done` (on the writer's thread, or at once on the caller's when nothing is queued) when the
  // queue is next empty. One at a time: a second call replaces the first.
  void notify_when_empty(std::function<void()> done);

 private:
  struct Chunk {
    int fd;
    std::string bytes;
  };
  void run(std::stop_token stop);
  // Writes all of `bytes` to `fd`, polling with a short timeout so a stop request is noticed; false
  // when the reader is gone (the fd is then skipped from now on) or a stop was requested.
  bool write_out(int fd, std::string_view bytes, std::stop_token& stop);

  std::function<void()> on_relieved_;
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;     // the thread: work or stop
  std::condition_variable progress_;     // drain(): the queue shrank
  std::deque<Chunk> queue_;
  std::size_t queued_ = 0;               // bytes in queue_ plus the chunk being written
  bool was_congested_ = false;
  std::function<void()> on_empty_;
  std::vector<int> broken_;              // fds whose reader went away
  std::jthread thread_;                  // last: starts after every member above exists
};

}  // namespace hvrun

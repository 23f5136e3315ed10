#include "launcher/output/output_writer.hpp"

#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"

namespace hvrun {

namespace {
// How often a writer blocked on a full pipe or terminal looks at its stop request.
constexpr int kPollMs = 100;
void report_broken(int fd, const char* call, int error) {
  const std::string what = fd == 1 ? "hvrun's stdout" : fd == 2 ? "hvrun's stderr" : "an --output-filename file";
  log_of(LogSubsys::kOutput)
      .warn("cannot write rank output to {} ({}: {}); what the ranks write there is dropped from now on", what, call,
            std::strerror(error));
}

}  // namespace

OutputWriter::OutputWriter(std::function<void()> on_relieved)
    : on_relieved_(std::move(on_relieved)), thread_([this](std::stop_token stop) { run(stop); }) {}

OutputWriter::~OutputWriter() {
  thread_.request_stop();
  wake_.notify_all();
  thread_.join();
}

void OutputWriter::write(int fd, std::string bytes) {
  if (bytes.empty()) return;
  {
    std::lock_guard lock(mutex_);
    if (std::find(broken_.begin(), broken_.end(), fd) != broken_.end()) return;
    queued_ += bytes.size();
    if (queued_ >= kQueueHighWater) was_congested_ = true;
    queue_.push_back(Chunk{fd, std::move(bytes)});
  }
  wake_.notify_one();
}

std::size_t OutputWriter::queued_bytes() const {
  std::lock_guard lock(mutex_);
  return queued_;
}

bool OutputWriter::drain(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return progress_.wait_for(lock, timeout, [this] { return queued_ == 0; });
}

void OutputWriter::notify_when_empty(std::function<void()> done) {
  {
    std::lock_guard lock(mutex_);
    if (queued_ != 0) {
      on_empty_ = std::move(done);
      return;
    }
  }
  done();
}

void OutputWriter::run(std::stop_token stop) {
  for (;;) {
    Chunk chunk;
    bool skip = false;
    {
      std::unique_lock lock(mutex_);
      if (!wake_.wait(lock, stop, [this] { return !queue_.empty(); })) return;
      chunk = std::move(queue_.front());
      queue_.pop_front();
      skip = std::find(broken_.begin(), broken_.end(), chunk.fd) != broken_.end();  // queued before it broke
    }
    const bool written = skip || write_out(chunk.fd, chunk.bytes, stop);
    std::function<void()> relieved, empty;
    {
      std::lock_guard lock(mutex_);
      if (!written && !stop.stop_requested()) broken_.push_back(chunk.fd);
      queued_ -= chunk.bytes.size();
      if (was_congested_ && queued_ < kQueueLowWater) {
        was_congested_ = false;
        relieved = on_relieved_;
      }
      if (queued_ == 0) empty = std::exchange(on_empty_, {});
    }
    progress_.notify_all();
    if (stop.stop_requested()) return;
    if (relieved) relieved();
    if (empty) empty();
  }
}

bool OutputWriter::write_out(int fd, std::string_view bytes, std::stop_token& stop) {
  while (!bytes.empty()) {
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, kPollMs);
    if (stop.stop_requested()) return false;
    if (ready < 0 && errno != EINTR) {
      report_broken(fd, "poll", errno);
      return false;
    }
    if (ready <= 0) continue;
    // POLLERR on a pipe: the reader is gone; write() below then says so with EPIPE.
    if (p.revents & POLLNVAL) {
      report_broken(fd, "poll", EBADF);
      return false;
    }
    // POLLOUT on a pipe promises room for PIPE_BUF bytes: a chunk that size never blocks.
    const ssize_t n = ::write(fd, bytes.data(), std::min<std::size_t>(bytes.size(), PIPE_BUF));
    if (n >= 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      report_broken(fd, "write", errno);  // EPIPE and friends: the reader is gone
      return false;
    }
  }
  return true;
}

}  // namespace hvrun

#pragma once
// The sending side of the link test (docs/DESIGN.md §3.5, common/probe_message.hpp): to each target's
// probe port, all at once, prove the job's secret, send raw bytes until `max_bytes` are sent or `max_ms`
// have passed since the first, end the stream and read the count the listener confirms. The figure is
// that count over the time from the first byte to the answer. Every pair has one deadline for all of it
// (`timeout_ms`); a pair that misses it, or whose listener is not the host meant, reports an error.
#include <functional>
#include <memory>

#include "common/control_message.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class JobSecret;

class LinkTester {
 public:
  using ResultHandler = std::function<void(LinkTestResultMsg)>;
  LinkTester(boost::asio::io_context& io, const JobSecret& secret);
  ~LinkTester();
  LinkTester(const LinkTester&) = delete;
  LinkTester& operator=(const LinkTester&) = delete;

  // `on_result` runs once per target, as each ends.
  void test(const LinkTestRequestMsg& request, ResultHandler on_result);

  // The sender's socket buffer: what is still queued when the time is up drains within the pair's
  // deadline even on a slow link (256 KiB at 1 MB/s: a quarter second).
  static constexpr int kSendBuffer = 256 * 1024;
  static constexpr std::size_t kChunk = 64 * 1024;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hvrun

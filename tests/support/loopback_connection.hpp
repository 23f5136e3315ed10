#pragma once
// Test support: a plain TCP connection to a server on 127.0.0.1, for speaking a protocol byte by byte
// (and wrongly on purpose): bytes out, bytes in under a deadline, and whether the server closed.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/unique_fd.hpp"

namespace hvrun::test {

class LoopbackConnection {
 public:
  explicit LoopbackConnection(std::uint16_t port);  // connects at once; REQUIREs success

  // The server may already have closed on us; that is what several tests want.
  void send(std::string_view bytes);
  // What arrived next, waiting until `deadline`; nothing at the deadline or once the server closed
  // (an orderly close or a reset: closed either way, see closed()).
  std::optional<std::string> read_some(std::chrono::steady_clock::time_point deadline);
  bool closed() const { return eof_; }

 private:
  UniqueFd fd_;
  bool eof_ = false;
};

}  // namespace hvrun::test

#pragma once
// Probes addresses of other hosts concurrently: TCP connect, send a fresh nonce, check the answer's
// HMAC and host index. Each probe has one deadline for all of it; a NIC that drops packets costs one
// deadline for all its probes together, since they all run at once.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/control_message.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class JobSecret;

class Prober {
 public:
  using ResultHandler = std::function<void(ProbeResultMsg)>;
  Prober(boost::asio::io_context& io, const JobSecret& secret);
  ~Prober();
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  // Starts every probe at once; `on_result` runs once per target, as each ends.
  void probe(const std::vector<ProbeAddress>& targets, std::chrono::milliseconds timeout, ResultHandler on_result);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hvrun

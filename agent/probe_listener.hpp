#pragma once
// Answers probes on every address of this host (one dual-stack TCP socket on all addresses). A
// prober sends a fresh nonce (ProbeChallenge, common/probe_message.hpp); the answer (ProbeAnswer)
// names this host's index in the job and proves membership with HMAC-SHA256(secret, nonce | index)
// (probe_mac_input). Nothing else is accepted: a connection that is silent, sends garbage or too much
// is closed within kPatience.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace hvrun {

class JobSecret;

class ProbeListener {
 public:
  explicit ProbeListener(boost::asio::io_context& io);  // binds [::]:0 (or 0.0.0.0:0 without IPv6)
  ~ProbeListener();
  ProbeListener(const ProbeListener&) = delete;
  ProbeListener& operator=(const ProbeListener&) = delete;

  std::uint16_t port() const;
  // Until identify() is called, connections are closed unanswered.
  void identify(const JobSecret& secret, int host_index, std::string hostname);

  static constexpr std::chrono::milliseconds kPatience{2000};
  static constexpr std::size_t kMaxRequest = 1024;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};
}  // namespace hvrun

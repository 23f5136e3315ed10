#pragma once
// Answers probes on every address of this host (one dual-stack TCP socket on all addresses). A
// prober sends a fresh nonce (ProbeChallenge, common/probe_message.hpp); the answer (ProbeAnswer)
// names this host's index in the job and proves membership with HMAC-SHA256(secret, nonce | index)
// (probe_mac_input). The link test's sender (agent/link_tester.hpp) comes to the same port with a
// LinkHello: this host answers a LinkChallenge, and counts the raw bytes that follow a LinkStart whose
// MAC proves the job's secret, up to kMaxLinkBytes, then answers their count (LinkCount) at the
// sender's end of stream. Nothing else is accepted: a connection that is silent, sends garbage or too
// much is closed within kPatience; a link test too, whole, since its pass is held until it closes.
//
// Bounded for strangers (common/stranger_gate.hpp): every open probe connection counts, at most
// kStrangerLimits.per_peer from one address and .total in all; over a bound the oldest is closed for the
// new one; refusals are logged a few times with a count. A prober's probes to this host come from each of
// its addresses and number at most this host's addresses each, so 64 from one address is a wide margin;
// 1,024 in all covers a probe round of hundreds of hosts arriving together.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/stranger_gate.hpp"

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
  static constexpr std::size_t kMaxRequest = 1024;  // the frames of a probe or a link test
  static constexpr std::size_t kMaxLinkBytes = 8u << 20;  // a link test's raw bytes
  static constexpr StrangerLimits kStrangerLimits{.per_peer = 64, .total = 1024, .deadline = kPatience};

  // Probe connections open now (for tests).
  std::size_t waiting() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};
}  // namespace hvrun

#pragma once
// The listening socket of a server that runs inside an existing single-threaded io_context (the job's
// store, Horovod's rendezvous, the agent's probe port): open, bind, listen, then accept until closed. An
// accept error (EMFILE, ENFILE, ENOBUFS: out of descriptors or memory) is retried after a pause that
// doubles from kFirstPause to kLongestPause while the errors go on, so the loop neither spins nor stops;
// the errors are logged a few times with a count (ThrottledLog), not once each.
#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/log.hpp"
#include "common/throttled_log.hpp"

namespace hvrun {

class TcpListener : public std::enable_shared_from_this<TcpListener> {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Endpoint = boost::asio::ip::tcp::endpoint;

  // `what` names the server in log lines ("store"), written by the logger of `subsys`. Make it with
  // std::make_shared: pending accepts keep it alive.
  TcpListener(boost::asio::io_context& io, std::string what, LogSubsys subsys);

  // Opens, binds and listens on `ep` (dual_stack: an IPv6 socket that takes IPv4 too). Returns the
  // error with the socket closed again, so the caller can try another endpoint and name the address.
  boost::system::error_code listen(const Endpoint& ep, bool dual_stack);
  // Hands every accepted connection to on_accept until close().
  void start(std::function<void(Socket)> on_accept);
  // Stops accepting and drops on_accept (and what it holds). Idempotent.
  void close();

  std::uint16_t port() const;
  Endpoint local_endpoint() const;

  static constexpr std::chrono::milliseconds kFirstPause{10};
  static constexpr std::chrono::milliseconds kLongestPause{1000};
  // Accept errors since the start, and the pause before the next retry (for tests).
  std::uint64_t accept_errors() const { return accept_errors_; }
  std::chrono::milliseconds pause() const { return pause_; }

 private:
  void accept();

  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  std::string what_;
  LogSubsys subsys_;
  std::function<void(Socket)> on_accept_;
  std::shared_ptr<ThrottledLog> errors_log_;
  std::uint64_t accept_errors_ = 0;
  std::chrono::milliseconds pause_{0};  // 0 after a successful accept
  bool closed_ = false;
};

// "1.2.3.4:5" or "[::1]:5", for messages.
std::string endpoint_text(const boost::asio::ip::tcp::endpoint& ep);

}  // namespace hvrun

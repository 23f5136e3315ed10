#include "common/tcp_listener.hpp"

#include <boost/asio/ip/v6_only.hpp>
#include <algorithm>

#include "common/local_hostname.hpp"
#include "common/log.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

TcpListener::TcpListener(asio::io_context& io, std::string what, LogSubsys subsys)
    : acceptor_(io),
      retry_timer_(io),
      what_(std::move(what)),
      subsys_(subsys),
      errors_log_(std::make_shared<ThrottledLog>(io, subsys)) {}

boost::system::error_code TcpListener::listen(const Endpoint& ep, bool dual_stack) {
  boost::system::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec && dual_stack) acceptor_.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }
  return ec;
}

void TcpListener::start(std::function<void(Socket)> on_accept) {
  on_accept_ = std::move(on_accept);
  accept();
  log_of(subsys_).debug("{}: listening on {}", what_, endpoint_text(local_endpoint()));
}

void TcpListener::accept() {
  acceptor_.async_accept([self = shared_from_this()](auto ec, tcp::socket socket) {
    if (self->closed_) return;
    if (ec) {
      ++self->accept_errors_;
      self->pause_ = self->pause_.count() == 0 ? kFirstPause : std::min(self->pause_ * 2, kLongestPause);
      const std::string error = ec.message();
      self->errors_log_->note(error, [what = self->what_, error, endpoint = endpoint_text(self->local_endpoint())](
                                         std::uint64_t n) {
        return what + " on " + local_hostname() + " (" + endpoint + "): accepting a connection failed" +
               (n == 1 ? std::string() : " " + count_text(n) + " times") + ": " + error +
               " (retrying after a pause of up to " + std::to_string(kLongestPause.count()) +
               " ms; if this is 'Too many open files', raise the hard open files limit, ulimit -Hn)";
      });
      self->retry_timer_.expires_after(self->pause_);
      self->retry_timer_.async_wait([self](auto wait_ec) {
        if (!wait_ec && !self->closed_) self->accept();
      });
      return;
    }
    self->pause_ = std::chrono::milliseconds(0);
    self->on_accept_(std::move(socket));
    if (!self->closed_) self->accept();  // on_accept may have closed the server
  });
}

void TcpListener::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_timer_.cancel();
  on_accept_ = nullptr;
}

std::uint16_t TcpListener::port() const { return local_endpoint().port(); }

TcpListener::Endpoint TcpListener::local_endpoint() const {
  boost::system::error_code ec;
  const auto ep = acceptor_.local_endpoint(ec);
  return ec ? Endpoint() : ep;
}

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" + std::to_string(ep.port());
}

}  // namespace hvrun

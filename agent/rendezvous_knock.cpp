#include "agent/rendezvous_knock.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>

#include "common/duration_text.hpp"

namespace hvrun {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct RendezvousKnock::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, const KnockMsg& k, Done d)
      : stream(io), knock(k), done(std::move(d)), timeout(std::chrono::milliseconds(k.timeout_ms)) {}

  beast::tcp_stream stream;
  KnockMsg knock;
  Done done;
  std::chrono::milliseconds timeout;
  Clock::time_point started = Clock::now();
  http::request<http::string_body> request;
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  bool finished = false;

  void start() {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address_v4(knock.address, ec);
    if (ec) return finish(false, "'" + knock.address + "' is not an IPv4 address");
    // The deadline covers the connect, the request and the answer: tcp_stream's expiry is not reset
    // between them.
    stream.expires_after(timeout);
    stream.async_connect(tcp::endpoint(address, static_cast<unsigned short>(knock.port)),
                         [self = shared_from_this()](auto e) { self->on_connected(e); });
  }

  void on_connected(const boost::system::error_code& ec) {
    if (finished) return;
    if (ec) return finish(false, failure_text(ec));
    request = {http::verb::put, "/hvrun/knock", 11};
    request.set(http::field::host, knock.address + ":" + std::to_string(knock.port));
    request.body() = knock.token;
    request.prepare_payload();
    http::async_write(stream, request, [self = shared_from_this()](auto e, std::size_t) {
      if (self->finished) return;
      if (e) return self->finish(false, self->failure_text(e));
      http::async_read(self->stream, self->buffer, self->response, [self](auto e2, std::size_t) {
        if (self->finished) return;
        if (e2) return self->finish(false, self->failure_text(e2));
        if (self->response.result() != http::status::ok)
          return self->finish(false, "answered " + std::to_string(self->response.result_int()));
        self->finish(true, {});
      });
    });
  }

  std::string failure_text(const boost::system::error_code& ec) const {
    if (ec == beast::error::timeout) return "no answer within " + seconds_text(timeout);
    if (ec == http::error::end_of_stream || ec == asio::error::eof)
      return "the connection was closed unanswered (not hvrun's rendezvous, or the token was refused)";
    return ec.message();
  }

  void finish(bool ok, const std::string& detail) {
    if (finished) return;
    finished = true;
    boost::system::error_code ignored;
    stream.socket().close(ignored);
    const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    if (done) done(KnockResultMsg{ok, ms, detail});
  }
};

RendezvousKnock::RendezvousKnock(asio::io_context& io, const KnockMsg& knock, Done done)
    : impl_(std::make_shared<Impl>(io, knock, std::move(done))) {
  impl_->start();
}

RendezvousKnock::~RendezvousKnock() {
  impl_->done = nullptr;
  impl_->finished = true;
  boost::system::error_code ignored;
  impl_->stream.socket().close(ignored);
}

}  // namespace hvrun

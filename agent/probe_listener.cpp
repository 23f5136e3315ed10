#include "agent/probe_listener.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/job_secret.hpp"
#include "common/probe_message.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// One probe connection: read one small request within kPatience, answer, close.
struct ProbeSession : std::enable_shared_from_this<ProbeSession> {
  explicit ProbeSession(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()), decoder("prober") {}

  tcp::socket socket;
  asio::steady_timer timer;
  FrameDecoder decoder;
  std::array<char, 512> buffer{};
  std::string reply;
  std::size_t received = 0;

  void close() {
    boost::system::error_code ignored;
    timer.cancel();
    socket.close(ignored);
  }
};

}  // namespace

struct ProbeListener::Impl : std::enable_shared_from_this<ProbeListener::Impl> {
  explicit Impl(asio::io_context& io) : acceptor(io) {
    boost::system::error_code ec;
    acceptor.open(tcp::v6(), ec);
    if (!ec) {
      acceptor.set_option(boost::asio::ip::v6_only(false), ec);
      acceptor.bind(tcp::endpoint(tcp::v6(), 0), ec);
    }
    if (ec) {  // no IPv6 on this host: IPv4 only
      acceptor.close(ec);
      acceptor.open(tcp::v4());
      acceptor.bind(tcp::endpoint(tcp::v4(), 0));
    }
    acceptor.listen(64);
  }

  tcp::acceptor acceptor;
  std::optional<JobSecret> secret;
  int host_index = -1;
  std::string hostname;

  void accept() {
    acceptor.async_accept([self = shared_from_this()](auto ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) self->serve(std::make_shared<ProbeSession>(std::move(socket)));
      self->accept();
    });
  }

  void serve(std::shared_ptr<ProbeSession> s) {
    if (!secret) return s->close();  // not part of a job yet: nothing to prove
    s->timer.expires_after(kPatience);
    s->timer.async_wait([s](auto ec) {
      if (!ec) s->close();  // silent or too slow
    });
    read(std::move(s));
  }

  void read(std::shared_ptr<ProbeSession> s) {
    s->socket.async_read_some(asio::buffer(s->buffer), [self = shared_from_this(), s](auto ec, std::size_t n) {
      if (ec) return s->close();
      s->received += n;
      if (s->received > kMaxRequest) return s->close();
      try {
        s->decoder.feed(std::string_view(s->buffer.data(), n));
        auto frame = s->decoder.next();
        if (!frame) return self->read(s);
        const ProbeChallenge challenge = decode_probe_challenge(frame->payload, "prober");
        const ProbeAnswer answer{self->host_index, self->hostname,
                                 self->secret->mac(probe_mac_input(challenge.nonce, self->host_index))};
        s->reply = encode_frame(FrameType::kControl, encode_probe_answer(answer));
      } catch (const std::exception&) {
        return s->close();  // garbage: no answer, no trace
      }
      asio::async_write(s->socket, asio::buffer(s->reply), [s](auto, std::size_t) { s->close(); });
    });
  }
};

ProbeListener::ProbeListener(asio::io_context& io) : impl_(std::make_shared<Impl>(io)) { impl_->accept(); }

ProbeListener::~ProbeListener() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
}

std::uint16_t ProbeListener::port() const { return impl_->acceptor.local_endpoint().port(); }

void ProbeListener::identify(const JobSecret& secret, int host_index, std::string hostname) {
  impl_->secret = secret;
  impl_->host_index = host_index;
  impl_->hostname = std::move(hostname);
}

}  // namespace hvrun

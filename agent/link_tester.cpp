#include "agent/link_tester.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <string>

#include "common/duration_text.hpp"
#include "common/frame_codec.hpp"
#include "common/job_secret.hpp"
#include "common/probe_message.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// One pair: connect, hello, challenge, start, bytes, end of stream, count.
struct LinkPair : std::enable_shared_from_this<LinkPair> {
  LinkPair(asio::io_context& io, std::shared_ptr<const JobSecret> s, const LinkTestRequestMsg& r, ProbeAddress t,
           LinkTester::ResultHandler h)
      : socket(io), timer(io), decoder("link test answer from " + t.address), secret(std::move(s)),
        max_bytes(static_cast<std::size_t>(std::max(0, r.max_bytes))), max_time(std::chrono::milliseconds(r.max_ms)),
        target(std::move(t)), on_result(std::move(h)) {}

  tcp::socket socket;
  asio::steady_timer timer;
  FrameDecoder decoder;
  std::shared_ptr<const JobSecret> secret;
  std::size_t max_bytes;
  std::chrono::milliseconds max_time;
  ProbeAddress target;
  LinkTester::ResultHandler on_result;
  std::string nonce = random_bytes(kProbeNonceSize);
  std::string out;
  std::string filler = std::string(LinkTester::kChunk, '\x5a');
  std::array<char, 1024> buffer{};
  std::size_t sent = 0;
  Clock::time_point first_byte;
  bool done = false;

  void finish(int bytes, int micros, const std::string& error) {
    if (done) return;
    done = true;
    boost::system::error_code ignored;
    timer.cancel();
    socket.close(ignored);
    on_result(LinkTestResultMsg{target.host, target.address, bytes, micros, error});
  }
  void fail(const std::string& error) { finish(0, 0, error); }

  void start(std::chrono::milliseconds timeout) {
    timer.expires_after(timeout);
    timer.async_wait([self = shared_from_this(), timeout](auto ec) {
      if (!ec) self->fail("no answer within " + seconds_text(timeout));
    });
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(target.address, ec);
    if (ec) return fail("not an address: " + target.address);
    socket.async_connect(tcp::endpoint(address, static_cast<unsigned short>(target.port)),
                         [self = shared_from_this()](auto e) { self->on_connected(e); });
  }

  void on_connected(const boost::system::error_code& ec) {
    if (done) return;
    if (ec) return fail("connect: " + ec.message());
    boost::system::error_code ignored;
    socket.set_option(asio::socket_base::send_buffer_size(LinkTester::kSendBuffer), ignored);
    socket.set_option(tcp::no_delay(true), ignored);
    out = encode_frame(FrameType::kControl, encode_link_hello(LinkHello{nonce}));
    asio::async_write(socket, asio::buffer(out), [self = shared_from_this()](auto e, std::size_t) {
      if (self->done) return;
      if (e) return self->fail("connection closed before the hello was sent: " + e.message());
      self->read_frame([self](std::string payload) { self->on_challenge(payload); });
    });
  }

  // Reads one control frame and hands its payload on.
  void read_frame(std::function<void(std::string)> then) {
    socket.async_read_some(asio::buffer(buffer), [self = shared_from_this(), then](auto ec, std::size_t n) {
      if (self->done) return;
      if (ec) return self->fail("the listener closed without an answer (" + ec.message() + ")");
      try {
        self->decoder.feed(std::string_view(self->buffer.data(), n));
        auto frame = self->decoder.next();
        if (!frame) {
          if (self->decoder.buffered() > 4096) return self->fail("oversized answer");
          return self->read_frame(then);
        }
        then(std::move(frame->payload));
      } catch (const std::exception& e) {
        self->fail(std::string("malformed answer: ") + e.what());
      }
    });
  }

  void on_challenge(const std::string& payload) {
    const LinkChallenge c = decode_link_challenge(payload, target.address);
    if (!secret->verify(link_listener_mac_input(nonce, c.host), c.mac))
      return fail("answer without a valid HMAC (another job or program on that port)");
    if (c.host != target.host) return fail("answered by another host of this job (host " + std::to_string(c.host) + ")");
    out = encode_frame(FrameType::kControl, encode_link_start(LinkStart{secret->mac(link_sender_mac_input(c.nonce))}));
    asio::async_write(socket, asio::buffer(out), [self = shared_from_this()](auto e, std::size_t) {
      if (self->done) return;
      if (e) return self->fail("connection closed before the test began: " + e.message());
      self->first_byte = Clock::now();
      self->send_more();
    });
  }

  void send_more() {
    if (sent >= max_bytes || Clock::now() - first_byte >= max_time) {
      boost::system::error_code ec;
      socket.shutdown(tcp::socket::shutdown_send, ec);
      if (ec) return fail("shutdown: " + ec.message());
      return read_frame([self = shared_from_this()](std::string payload) { self->on_count(payload); });
    }
    const std::size_t n = std::min(filler.size(), max_bytes - sent);
    asio::async_write(socket, asio::buffer(filler.data(), n), [self = shared_from_this()](auto e, std::size_t k) {
      if (self->done) return;
      if (e) return self->fail("sending: " + e.message());
      self->sent += k;
      self->send_more();
    });
  }

  void on_count(const std::string& payload) {
    const LinkCount c = decode_link_count(payload, target.address);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - first_byte).count();
    if (static_cast<std::size_t>(c.bytes) > sent)
      return fail("the listener counted " + std::to_string(c.bytes) + " bytes of " + std::to_string(sent) + " sent");
    finish(c.bytes, static_cast<int>(std::max<long long>(1, us)), {});
  }
};

}  // namespace

struct LinkTester::Impl {
  Impl(asio::io_context& i, const JobSecret& s) : io(i), secret(std::make_shared<const JobSecret>(s)) {}
  asio::io_context& io;
  std::shared_ptr<const JobSecret> secret;
};

LinkTester::LinkTester(asio::io_context& io, const JobSecret& secret) : impl_(std::make_shared<Impl>(io, secret)) {}
LinkTester::~LinkTester() = default;

void LinkTester::test(const LinkTestRequestMsg& request, ResultHandler on_result) {
  for (const ProbeAddress& t : request.targets)
    std::make_shared<LinkPair>(impl_->io, impl_->secret, request, t, on_result)
        ->start(std::chrono::milliseconds(request.timeout_ms));
}

}  // namespace hvrun

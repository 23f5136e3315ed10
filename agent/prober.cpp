#include "agent/prober.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/job_secret.hpp"
#include "common/probe_message.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Probe : std::enable_shared_from_this<Probe> {
  Probe(asio::io_context& io, const JobSecret& s, ProbeAddress t, Prober::ResultHandler h)
      : socket(io), timer(io), decoder("probe answer"), secret(s), target(std::move(t)), on_result(std::move(h)) {}

  tcp::socket socket;
  asio::steady_timer timer;
  FrameDecoder decoder;
  const JobSecret& secret;
  ProbeAddress target;
  Prober::ResultHandler on_result;
  std::string nonce = random_bytes(kProbeNonceSize);
  std::string request;
  std::array<char, 1024> buffer{};
  Clock::time_point started = Clock::now();
  bool done = false;

  void finish(ProbeOutcome outcome, const std::string& detail = {}, int answered_as = -1) {
    if (done) return;
    done = true;
    boost::system::error_code ignored;
    timer.cancel();
    socket.close(ignored);
    const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    on_result(ProbeResultMsg{target.host, target.iface, target.address, outcome, answered_as, ms, detail});
  }

  void start(std::chrono::milliseconds timeout) {
    timer.expires_after(timeout);
    timer.async_wait([self = shared_from_this()](auto ec) {
      if (!ec) self->finish(ProbeOutcome::kTimeout, "no answer within the probe timeout");
    });
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(target.address, ec);
    if (ec) return finish(ProbeOutcome::kUnreachable, "not an address: " + target.address);
    socket.async_connect(tcp::endpoint(address, static_cast<unsigned short>(target.port)),
                         [self = shared_from_this()](auto e) { self->on_connected(e); });
  }

  void on_connected(const boost::system::error_code& ec) {
    if (done) return;
    if (ec == asio::error::connection_refused) return finish(ProbeOutcome::kRefused, ec.message());
    // No route, an address of nowhere, and everything else that is not a refusal: nobody there.
    if (ec) return finish(ProbeOutcome::kUnreachable, ec.message());
    request = encode_frame(FrameType::kControl, encode_probe_challenge(ProbeChallenge{nonce}));
    asio::async_write(socket, asio::buffer(request), [self = shared_from_this()](auto e, std::size_t) {
      if (e) return self->finish(ProbeOutcome::kRefused, "connection closed before the nonce was sent: " + e.message());
      self->read();
    });
  }

  void read() {
    socket.async_read_some(asio::buffer(buffer), [self = shared_from_this()](auto ec, std::size_t n) {
      if (self->done) return;
      if (ec) return self->finish(ProbeOutcome::kAuthFailed, "the listener closed without a valid answer");
      try {
        self->decoder.feed(std::string_view(self->buffer.data(), n));
        auto frame = self->decoder.next();
        if (!frame) {
          if (self->decoder.buffered() > 4096) return self->finish(ProbeOutcome::kAuthFailed, "oversized answer");
          return self->read();
        }
        self->check(decode_probe_answer(frame->payload, self->target.address));
      } catch (const std::exception& e) {
        self->finish(ProbeOutcome::kAuthFailed, std::string("malformed answer: ") + e.what());
      }
    });
  }

  void check(const ProbeAnswer& answer) {
    if (!secret.verify(probe_mac_input(nonce, answer.host), answer.mac))
      return finish(ProbeOutcome::kAuthFailed, "answer without a valid HMAC (another job or program on that port)");
    if (answer.host != target.host)
      return finish(ProbeOutcome::kWrongHost, "answered by another host of this job", answer.host);
    finish(ProbeOutcome::kOk);
  }
};

}  // namespace

struct Prober::Impl {
  Impl(asio::io_context& i, const JobSecret& s) : io(i), secret(s) {}
  asio::io_context& io;
  JobSecret secret;
};

Prober::Prober(asio::io_context& io, const JobSecret& secret)
    : impl_(std::make_shared<Impl>(io, secret)) {}

Prober::~Prober() = default;

void Prober::probe(const std::vector<ProbeAddress>& targets, std::chrono::milliseconds timeout,
                   ResultHandler on_result) {
  for (const auto& t : targets) {
    // The probe keeps the prober's secret alive through `impl_` for as long as it runs.
    auto keep = impl_;
    auto p = std::make_shared<Probe>(impl_->io, impl_->secret, t,
                                     [keep, on_result](ProbeResultMsg r) { on_result(std::move(r)); });
    p->start(timeout);
  }
}

}  // namespace hvrun

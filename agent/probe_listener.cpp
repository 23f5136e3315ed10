#include "agent/probe_listener.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/job_secret.hpp"
#include "common/local_hostname.hpp"
#include "common/probe_message.hpp"
#include "common/stranger_gate.hpp"
#include "common/tcp_listener.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// One probe connection: read one small request within kPatience (the gate's deadline), answer, close.
struct ProbeSession : std::enable_shared_from_this<ProbeSession> {
  explicit ProbeSession(tcp::socket s) : socket(std::move(s)), decoder("prober") {}

  tcp::socket socket;
  StrangerGate::Pass pass;  // every probe connection is a stranger's until it is closed
  FrameDecoder decoder;
  std::array<char, 512> buffer{};
  std::string reply;
  std::size_t received = 0;
  // A link test's: the nonce this listener sent, then the raw bytes counted once the sender proved the
  // secret (a bigger buffer for them).
  std::string link_nonce;
  bool counting = false;
  std::size_t counted = 0;
  std::vector<char> bulk;

  void close() {
    boost::system::error_code ignored;
    socket.close(ignored);
    pass.release();
  }
};

}  // namespace

struct ProbeListener::Impl : std::enable_shared_from_this<ProbeListener::Impl> {
  explicit Impl(asio::io_context& io)
      : listener(std::make_shared<TcpListener>(io, "probe listener", LogSubsys::kNic)),
        gate(std::make_shared<StrangerGate>(io, "the probe port on " + local_hostname(), LogSubsys::kNic,
                                            kStrangerLimits)) {
    if (listener->listen(tcp::endpoint(tcp::v6(), 0), true))  // no IPv6 on this host: IPv4 only
      if (const auto ec = listener->listen(tcp::endpoint(tcp::v4(), 0), false))
        throw Error("probe listener: cannot listen on every address: " + ec.message());
  }

  std::shared_ptr<TcpListener> listener;
  std::shared_ptr<StrangerGate> gate;
  std::optional<JobSecret> secret;
  int host_index = -1;
  std::string hostname;

  void start() {
    listener->start([weak = weak_from_this()](tcp::socket socket) {
      if (auto self = weak.lock()) self->serve(std::make_shared<ProbeSession>(std::move(socket)));
    });
  }

  void serve(std::shared_ptr<ProbeSession> s) {
    if (!secret) return s->close();  // not part of a job yet: nothing to prove
    boost::system::error_code ec;
    const auto peer = s->socket.remote_endpoint(ec);
    if (ec) return s->close();
    s->pass = gate->admit(peer.address(), [weak = std::weak_ptr<ProbeSession>(s)](const std::string&) {
      if (auto session = weak.lock()) session->close();  // silent, too slow, or crowded out
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
        if (!s->link_nonce.empty()) return self->start_counting(s, frame->payload);
        if (self->answer(s, frame->payload)) return self->read(s);  // a link test: its start comes next
      } catch (const std::exception&) {
        return s->close();  // garbage: no answer, no trace
      }
      asio::async_write(s->socket, asio::buffer(s->reply), [s](auto, std::size_t) { s->close(); });
    });
  }

  // The first frame: a probe's challenge (the reply is the whole exchange: false), or a link test's
  // hello (the reply is this listener's challenge, written here: true). Throws for anything else.
  bool answer(const std::shared_ptr<ProbeSession>& s, const std::string& payload) {
    std::optional<ProbeChallenge> challenge;
    try {
      challenge = decode_probe_challenge(payload, "prober");
    } catch (const ProtocolError&) {
      const LinkHello hello = decode_link_hello(payload, "link tester");
      s->link_nonce = random_bytes(kProbeNonceSize);
      s->reply = encode_frame(FrameType::kControl,
                             encode_link_challenge(LinkChallenge{host_index, s->link_nonce,
                                                                 secret->mac(link_listener_mac_input(hello.nonce, host_index))}));
      asio::async_write(s->socket, asio::buffer(s->reply), [s](auto, std::size_t) {});  // a failure ends the read
      return true;
    }
    s->reply = encode_frame(FrameType::kControl,
                            encode_probe_answer(ProbeAnswer{host_index, hostname, secret->mac(probe_mac_input(challenge->nonce, host_index))}));
    return false;
  }

  // The link test's start: a sender without the job's secret is closed unanswered; else the raw bytes
  // after the frame are counted until the sender ends its stream.
  void start_counting(std::shared_ptr<ProbeSession> s, const std::string& payload) {
    const LinkStart start = decode_link_start(payload, "link tester");
    if (!secret->verify(link_sender_mac_input(s->link_nonce), start.mac)) return s->close();
    s->counting = true;
    s->counted = s->decoder.buffered();
    s->bulk.resize(64 * 1024);
    count(std::move(s));
  }

  void count(std::shared_ptr<ProbeSession> s) {
    s->socket.async_read_some(asio::buffer(s->bulk), [self = shared_from_this(), s](auto ec, std::size_t n) {
      s->counted += n;
      if (s->counted > kMaxLinkBytes) return s->close();
      if (!ec) return self->count(s);
      if (ec != asio::error::eof) return s->close();
      s->reply = encode_frame(FrameType::kControl, encode_link_count(LinkCount{static_cast<int>(s->counted)}));
      asio::async_write(s->socket, asio::buffer(s->reply), [s](auto, std::size_t) { s->close(); });
    });
  }
};

ProbeListener::ProbeListener(asio::io_context& io) : impl_(std::make_shared<Impl>(io)) { impl_->start(); }

ProbeListener::~ProbeListener() { impl_->listener->close(); }

std::uint16_t ProbeListener::port() const { return impl_->listener->port(); }

void ProbeListener::identify(const JobSecret& secret, int host_index, std::string hostname) {
  impl_->secret = secret;
  impl_->host_index = host_index;
  impl_->hostname = std::move(hostname);
}

std::size_t ProbeListener::waiting() const { return impl_->gate->waiting(); }

}  // namespace hvrun

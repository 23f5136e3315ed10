#include "common/horovod_rendezvous.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <openssl/crypto.h>

#include <charconv>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/error.hpp"
#include "common/job_secret.hpp"
#include "common/local_hostname.hpp"
#include "common/log.hpp"
#include "common/stranger_gate.hpp"
#include "common/tcp_listener.hpp"

namespace hvrun {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Beyond the header, what the read buffer may hold: Beast moves body bytes through it in reads of at
// most 64 KiB.
constexpr std::size_t kReadSlack = 128 * 1024;
constexpr std::string_view kKnockTarget = "/hvrun/knock";
// What a connection from an address not allowed may send: a knock's request line, a few headers, the token.
constexpr std::size_t kKnockMaxHeader = 512;
constexpr std::size_t kKnockMaxBody = HorovodRendezvous::kKnockTokenSize;
// Strangers' connections have their own small bounds and a short deadline (common/stranger_gate.hpp:
// over a bound the oldest is closed for the new one): whoever can reach the port while a knock is
// expected must not crowd out the workers, whose connections the main bound counts, nor the knocks.
// An agent's knock is one small request sent as soon as it connects, one per joining host.
// Idle connections of allowed peers from one address: a host's ranks all reach the rendezvous at once
// at a start, up to 1,024 of them.
constexpr std::size_t kIdlePerPeer = 1024;
constexpr StrangerLimits kKnockStrangerLimits{.per_peer = 8, .total = 64, .deadline = std::chrono::milliseconds(2000)};

}  // namespace

// Outside the anonymous namespace: HorovodRendezvousState, which the header declares, holds it (GCC's
// -Wsubobject-linkage in a unity build), so its name is unique in the project.
class HttpSession;

struct HorovodRendezvousState : std::enable_shared_from_this<HorovodRendezvousState> {
  HorovodRendezvousState(asio::io_context& io, HorovodRendezvousOptions o)
      : listener(std::make_shared<TcpListener>(io, "horovod rendezvous", LogSubsys::kRendezvous)),
        gate(std::make_shared<StrangerGate>(io, "the Horovod rendezvous on " + local_hostname(),
                                            LogSubsys::kRendezvous, kKnockStrangerLimits)),
        options(std::move(o)) {
    // Every connection holds a descriptor: keep the bound within this process's share of them.
    options.limits.max_connections =
        std::max<std::size_t>(1, std::min(options.limits.max_connections, StrangerGate::descriptor_budget()));
    idle_gate = std::make_shared<StrangerGate>(
        io, "the Horovod rendezvous on " + local_hostname(), LogSubsys::kRendezvous,
        StrangerLimits{.per_peer = kIdlePerPeer, .total = options.limits.max_connections,
                       .deadline = options.limits.request_timeout});
  }

  std::shared_ptr<TcpListener> listener;
  std::vector<std::shared_ptr<TcpListener>> more_listeners;  // listen_also
  std::shared_ptr<StrangerGate> gate;       // connections that may only knock
  std::shared_ptr<StrangerGate> idle_gate;  // allowed peers' connections waiting for their next request
  HorovodRendezvousOptions options;
  std::unordered_map<std::string, std::string> data;
  std::size_t total = 0;  // sum of the sizes of data's keys and values
  std::unordered_set<std::shared_ptr<HttpSession>> sessions;
  std::vector<std::pair<std::string, std::function<void(const std::string&)>>> knocks;  // expect_knock
  bool closed = false;

  void accept(tcp::socket socket);
  // Whether `peer` is answered: fully (allowed), for a knock only, or not at all.
  enum class Admission { kRefused, kKnockOnly, kFull };
  Admission admit(const tcp::endpoint& peer);
  // The knock callback of `token` (spent), or nothing when no expected token matches; every expected
  // token is compared in constant time.
  std::function<void(const std::string&)> take_knock(std::string_view token);
  void refuse(const tcp::endpoint& peer, const std::string& why);
  void erase(const std::string& key);
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::shared_ptr<HorovodRendezvousState> server, tcp::socket socket, std::string peer,
              std::string peer_address, bool knock_only)
      : server_(std::move(server)),
        stream_(std::move(socket)),
        buffer_(knock_only ? kKnockMaxHeader + kKnockMaxBody : server_->options.limits.max_header + kReadSlack),
        peer_(std::move(peer)),
        peer_address_(std::move(peer_address)),
        knock_only_(knock_only) {}

  // `pass`: a stranger's place among those that may only knock (none for an allowed peer).
  void start(StrangerGate::Pass pass) {
    pass_ = std::move(pass);
    read();
  }

  void close(const std::string& why) {
    if (closed_) return;
    closed_ = true;
    log_of(LogSubsys::kRendezvous).debug("horovod rendezvous: closing connection from {}: {}", peer_, why);
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    no_longer_stranger();
    // Last: this may drop the server's reference to us; handlers in flight hold their own.
    server_->sessions.erase(shared_from_this());
  }

 private:
  const HorovodRendezvousLimits& limits() const { return server_->options.limits; }
  std::chrono::milliseconds request_timeout() const {
    return knock_only_ ? std::min(kKnockStrangerLimits.deadline, limits().request_timeout) : limits().request_timeout;
  }
  void no_longer_stranger() {
    knock_only_ = false;
    pass_.release();
  }

  void read() {
    // Between requests a worker's connection is as anonymous as a stranger's (Horovod's client sends no
    // credential): idle ones are bounded per address and in all, the oldest closed for the new one.
    if (!knock_only_ && !pass_.held())
      pass_ = server_->idle_gate->admit(asio::ip::make_address(peer_address_),
                                        [weak = weak_from_this()](const std::string& why) {
                                          if (auto self = weak.lock()) self->close(why);
                                        });
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(knock_only_ ? kKnockMaxHeader : limits().max_header));
    parser_->body_limit(knock_only_ ? kKnockMaxBody : limits().max_value);
    stream_.expires_after(request_timeout());
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](auto ec, std::size_t) {
      if (self->closed_) return;
      if (ec == http::error::end_of_stream) return self->close("closed by the client");
      if (ec && self->knock_only_) return self->close("not a knock: " + ec.message());
      if (ec == http::error::header_limit)
        return self->refuse_request(http::status::request_header_fields_too_large,
                                    "request header over " + std::to_string(self->limits().max_header) + " bytes");
      if (ec == http::error::body_limit)
        return self->refuse_request(http::status::payload_too_large,
                                    "value over " + std::to_string(self->limits().max_value) + " bytes");
      if (ec == beast::error::timeout)
        return self->close("no whole request within " + std::to_string(self->request_timeout().count()) + " ms");
      if (ec) return self->close(ec.message());
      if (!self->knock_only_) self->pass_.release();  // a whole request: no longer idle
      self->handle(self->parser_->release());
    });
  }

  // Keys are whole request targets ("/global/rank_0"): Horovod puts its scope in the path, and every
  // scope (global, local_<host>, cross_<n>, process-set suffixes, elastic ones) is accepted as it comes.
  void handle(http::request<http::string_body>&& req) {
    const bool keep_alive = req.keep_alive();
    const std::string key(req.target());
    if (req.method() == http::verb::put && key == kKnockTarget) return handle_knock(req);
    if (knock_only_) return close("not a knock: " + std::string(req.method_string()) + " " + key);
    if (key.empty() || key.front() != '/') return respond(http::status::bad_request, req.version(), false, {});
    if (server_->options.elastic && handle_elastic(req, key, keep_alive)) return;
    auto& data = server_->data;
    switch (req.method()) {
      case http::verb::get: {
        const auto it = data.find(key);
        if (it == data.end()) return respond(http::status::not_found, req.version(), keep_alive, {});
        return respond(http::status::ok, req.version(), keep_alive, it->second);
      }
      case http::verb::put: {
        std::string& value = req.body();
        const auto it = data.find(key);
        const std::size_t old_size = it == data.end() ? 0 : key.size() + it->second.size();
        if (it == data.end() && data.size() >= limits().max_keys)
          return refuse_request(http::status::insufficient_storage,
                                "already " + std::to_string(data.size()) + " keys held (the bound)");
        if (server_->total - old_size + key.size() + value.size() > limits().max_total)
          return refuse_request(http::status::insufficient_storage,
                                "keys and values would exceed " + std::to_string(limits().max_total) + " bytes");
        server_->total = server_->total - old_size + key.size() + value.size();
        data[key] = std::move(value);
        return respond(http::status::ok, req.version(), keep_alive, {});
      }
      case http::verb::delete_:
        server_->erase(key);
        return respond(http::status::ok, req.version(), keep_alive, {});
      default:
        return respond(http::status::method_not_allowed, req.version(), false, {});
    }
  }

  // Horovod elastic's requests (HorovodElasticHooks); false for any other request, which is served as
  // a plain store request (worker_addresses after its hook).
  bool handle_elastic(http::request<http::string_body>& req, const std::string& key, bool keep_alive) {
    static constexpr std::string_view kRankAndSize = "/rank_and_size/", kWorkerAddresses = "/worker_addresses/",
                                      kGlobal = "/global/";
    const HorovodElasticHooks& hooks = *server_->options.elastic;
    if (req.method() == http::verb::put && key.starts_with(kGlobal) && hooks.global_rank_published) {
      int rank = -1;
      const char* end = key.data() + key.size();
      const auto [p, ec] = std::from_chars(key.data() + kGlobal.size(), end, rank);
      if (ec == std::errc{} && p == end && rank >= 0) hooks.global_rank_published(rank);
      return false;  // stored
    }
    const bool rank_and_size = req.method() == http::verb::get && key.starts_with(kRankAndSize);
    const bool addresses = req.method() == http::verb::put && key.starts_with(kWorkerAddresses);
    if (!rank_and_size && !addresses) return false;
    const std::string slot = key.substr(rank_and_size ? kRankAndSize.size() : kWorkerAddresses.size());
    const std::size_t colon = slot.rfind(':');
    int local_rank = -1;
    if (colon != std::string::npos && colon > 0) {
      const char* end = slot.data() + slot.size();
      const auto [p, ec] = std::from_chars(slot.data() + colon + 1, end, local_rank);
      if (ec != std::errc{} || p != end) local_rank = -1;
    }
    if (local_rank < 0) {
      refuse_request(http::status::bad_request, "'" + key + "' does not end in HOST:LOCAL_RANK");
      return true;
    }
    const std::string host = slot.substr(0, colon);
    if (addresses) {
      try {
        hooks.worker_addresses(host, local_rank, decode_worker_addresses_put(req.body(), "the worker " + slot + " at " + peer_));
      } catch (const ProtocolError& e) {
        refuse_request(http::status::bad_request, e.what());
        return true;
      }
      return false;  // stored as well, as Horovod's handler does
    }
    // Held until the driver answers: no request timeout while the round waits for the other workers.
    stream_.expires_never();
    auto answered = std::make_shared<bool>(false);
    hooks.rank_and_size(host, local_rank,
                        [weak = weak_from_this(), version = req.version(), keep_alive, answered](std::string body) {
                          if (*answered) return;
                          *answered = true;
                          if (auto self = weak.lock(); self && !self->closed_)
                            self->respond(http::status::ok, version, keep_alive, std::move(body));
                        });
    return true;
  }

  // PUT /hvrun/knock: a token expected is answered 200 and spent; from a stranger anything else ends
  // the connection unanswered, from an allowed peer it is answered 403.
  void handle_knock(const http::request<http::string_body>& req) {
    auto knocked = server_->take_knock(req.body());
    if (!knocked) {
      if (knock_only_) return close("a knock with a token not expected");
      return refuse_request(http::status::forbidden, "a knock with a token not expected");
    }
    server_->options.allowed_peers.insert(peer_address_);
    no_longer_stranger();
    log_of(LogSubsys::kRendezvous).debug("horovod rendezvous: a knock from {}", peer_);
    knocked(peer_address_);
    respond(http::status::ok, req.version(), false, {});
  }

  // A request the bounds refuse: the answer says why (Horovod's client retries, then aborts the rank
  // naming the status), the agent's log says who, and the connection ends.
  void refuse_request(http::status status, const std::string& why) {
    log_of(LogSubsys::kRendezvous).warn("horovod rendezvous: refused a request from {}: {}", peer_, why);
    respond(status, 11, false, why);
  }

  void respond(http::status status, unsigned version, bool keep_alive, std::string body) {
    response_ = {};
    response_.result(status);
    response_.version(version);
    response_.keep_alive(keep_alive);
    response_.body() = std::move(body);
    response_.prepare_payload();  // Content-Length, which Horovod's client needs, even for 0 bytes
    stream_.expires_after(limits().request_timeout);
    http::async_write(stream_, response_, [self = shared_from_this(), keep_alive](auto ec, std::size_t) {
      if (self->closed_) return;
      if (ec) return self->close("write failed: " + ec.message());
      if (!keep_alive) return self->close("answered");
      self->read();
    });
  }

  std::shared_ptr<HorovodRendezvousState> server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::string peer_;
  std::string peer_address_;  // its IPv4 address alone
  StrangerGate::Pass pass_;
  bool knock_only_;           // a peer not allowed, while a knock is expected
  bool closed_ = false;
};

void HorovodRendezvousState::accept(tcp::socket socket) {
  boost::system::error_code peer_ec;
  const auto remote = socket.remote_endpoint(peer_ec);
  const Admission admission = peer_ec ? Admission::kRefused : admit(remote);
  if (admission != Admission::kRefused) {
    const bool knock_only = admission == Admission::kKnockOnly;
    auto session = std::make_shared<HttpSession>(shared_from_this(), std::move(socket), endpoint_text(remote),
                                                 remote.address().to_string(), knock_only);
    sessions.insert(session);
    StrangerGate::Pass pass;
    if (knock_only)
      pass = gate->admit(remote.address(), [weak = std::weak_ptr<HttpSession>(session)](const std::string& why) {
        if (auto s = weak.lock()) s->close(why);
      });
    session->start(std::move(pass));
  } else {
    boost::system::error_code ignored;
    socket.close(ignored);  // unanswered: a stranger learns nothing of the keys
  }
}

HorovodRendezvousState::Admission HorovodRendezvousState::admit(const tcp::endpoint& peer) {
  const std::string address = peer.address().to_string();
  const bool allowed = options.allowed_peers.contains(address);
  if (!allowed && knocks.empty()) {
    refuse(peer, "not an address of the job's hosts");
    return Admission::kRefused;
  }
  if (sessions.size() >= options.limits.max_connections) {
    refuse(peer, "over the limit of " + count_text(options.limits.max_connections) + " open connections");
    return Admission::kRefused;
  }
  return allowed ? Admission::kFull : Admission::kKnockOnly;
}

std::function<void(const std::string&)> HorovodRendezvousState::take_knock(std::string_view token) {
  std::function<void(const std::string&)> found;
  std::size_t at = knocks.size();
  if (token.size() != HorovodRendezvous::kKnockTokenSize) return found;
  for (std::size_t i = 0; i < knocks.size(); ++i)
    if (CRYPTO_memcmp(knocks[i].first.data(), token.data(), token.size()) == 0) at = i;
  if (at == knocks.size()) return found;
  found = std::move(knocks[at].second);
  knocks.erase(knocks.begin() + static_cast<std::ptrdiff_t>(at));
  return found;
}

void HorovodRendezvousState::refuse(const tcp::endpoint& peer, const std::string& why) {
  gate->note_refusal(StrangerGate::address_text(peer.address()), why);
}

void HorovodRendezvousState::erase(const std::string& key) {
  const auto it = data.find(key);
  if (it == data.end()) return;
  total -= key.size() + it->second.size();
  data.erase(it);
}

namespace {

// Listens on `address`:`port` and hands what it accepts to `state`.
void listen_on(TcpListener& listener, const std::shared_ptr<HorovodRendezvousState>& state,
               const std::string& address_text, std::uint16_t port) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address_v4(address_text, ec);
  if (ec)
    throw Error("horovod rendezvous: '" + address_text +
                "' is not an IPv4 address (Horovod's rendezvous client speaks IPv4 only)");
  const tcp::endpoint ep(address, port);
  if (const auto listen_ec = listener.listen(ep, false))
    throw Error("horovod rendezvous: cannot listen on " + endpoint_text(ep) + ": " + listen_ec.message());
  listener.start([weak = std::weak_ptr<HorovodRendezvousState>(state)](tcp::socket socket) {
    if (auto self = weak.lock()) self->accept(std::move(socket));
  });
}

}  // namespace

HorovodRendezvous::HorovodRendezvous(asio::io_context& io, HorovodRendezvousOptions options)
    : state_(std::make_shared<HorovodRendezvousState>(io, std::move(options))) {
  const auto& o = state_->options;
  if (o.allowed_peers.empty()) throw Error("horovod rendezvous: refusing to serve nobody (no allowed peers)");
  listen_on(*state_->listener, state_, o.address, o.port);
}

std::uint16_t HorovodRendezvous::listen_also(asio::io_context& io, const std::string& address) {
  if (state_->closed) throw Error("horovod rendezvous: closed, cannot listen on " + address);
  if (address == state_->options.address) return port();
  for (const auto& l : state_->more_listeners)
    if (l->local_endpoint().address().to_string() == address) return l->port();
  auto listener = std::make_shared<TcpListener>(io, "horovod rendezvous", LogSubsys::kRendezvous);
  try {
    listen_on(*listener, state_, address, port());  // the same port where it is free
  } catch (const Error&) {
    listen_on(*listener, state_, address, 0);
  }
  state_->more_listeners.push_back(listener);
  return listener->port();
}

std::string HorovodRendezvous::new_knock_token() { return hex_encode(random_bytes(kKnockTokenSize / 2)); }

void HorovodRendezvous::expect_knock(const std::string& token, std::function<void(const std::string&)> knocked) {
  if (token.size() != kKnockTokenSize)
    throw Error("horovod rendezvous: a knock token must be " + std::to_string(kKnockTokenSize) + " characters");
  state_->knocks.emplace_back(token, std::move(knocked));
}

void HorovodRendezvous::forget_knock(const std::string& token) {
  std::erase_if(state_->knocks, [&](const auto& k) { return k.first == token; });
}

HorovodRendezvous::~HorovodRendezvous() { close(); }

std::uint16_t HorovodRendezvous::port() const { return state_->listener->port(); }

void HorovodRendezvous::clear_keys() {
  state_->data.clear();
  state_->total = 0;
}

void HorovodRendezvous::close() {
  if (state_->closed) return;
  state_->closed = true;
  state_->listener->close();
  for (const auto& l : state_->more_listeners) l->close();
  // HttpSession::close erases itself from the set, so walk a copy.
  auto sessions = state_->sessions;
  for (const auto& s : sessions) s->close("rendezvous closed");
  state_->sessions.clear();
  state_->knocks.clear();
  state_->data.clear();
  state_->total = 0;
}

std::size_t HorovodRendezvous::key_count() const { return state_->data.size(); }
std::size_t HorovodRendezvous::connection_count() const { return state_->sessions.size(); }
std::size_t HorovodRendezvous::refused_count() const {
  return state_->gate->dropped() + state_->idle_gate->dropped();
}

}  // namespace hvrun

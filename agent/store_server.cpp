#include "agent/store_server.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <deque>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/io_sizes.hpp"
#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/invariant.hpp"
#include "common/local_hostname.hpp"
#include "common/stranger_gate.hpp"
#include "common/tcp_listener.hpp"
#include "common/log.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// The value `add` keeps: a decimal integer, as c10d's TCPStore keeps it, so `get` shows it plainly.
std::optional<std::int64_t> parse_counter(const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

// Outside the anonymous namespace: StoreServerState, which the header declares, holds it (GCC's
// -Wsubobject-linkage in a unity build), so its name is unique in the project.
class StoreSession;

struct StoreServerState : std::enable_shared_from_this<StoreServerState> {
  StoreServerState(asio::io_context& io, std::string t, StoreServerOptions o)
      : io(io),
        listener(std::make_shared<TcpListener>(io, "store", LogSubsys::kStore)),
        gate(std::make_shared<StrangerGate>(io, "the store on " + local_hostname(), LogSubsys::kStore,
                                            StrangerLimits{.per_peer = o.max_unauthenticated_per_peer,
                                                           .total = o.max_unauthenticated,
                                                           .deadline = o.auth_timeout})),
        token(std::move(t)),
        options(o) {}

  asio::io_context& io;
  std::shared_ptr<TcpListener> listener;
  std::shared_ptr<StrangerGate> gate;
  std::string token;
  StoreServerOptions options;
  std::unordered_map<std::string, std::string> data;
  // Sessions whose pending get/wait misses the key. Entries leave when the key is set or the request ends.
  std::unordered_map<std::string, std::vector<std::weak_ptr<StoreSession>>> watchers;
  std::unordered_set<std::shared_ptr<StoreSession>> sessions;
  bool closed = false;

  void accept(tcp::socket socket);
  void notify(const std::string& key);
  void unwatch(const std::string& key, const StoreSession* s);
};

class StoreSession : public std::enable_shared_from_this<StoreSession> {
 public:
  StoreSession(std::shared_ptr<StoreServerState> server, tcp::socket socket, std::string peer,
              std::string peer_address)
      : server_(std::move(server)),
        socket_(std::move(socket)),
        timer_(server_->io),
        peer_(std::move(peer)),
        peer_address_(std::move(peer_address)),
        decoder_(peer_, store::kMaxUnauthenticatedMessage) {}

  // `pass`: this connection's place among the unauthenticated ones, held until it authenticates.
  void start(StrangerGate::Pass pass) {
    pass_ = std::move(pass);
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    nonce_ = store::random_nonce();
    store::Message hello{.kind = store::Kind::kHello, .number = store::kProtocolVersion};
    hello.data = nonce_;
    send(hello);
    read_more();
  }

  // Ends the session: its socket, timer and watches. `loud`: worth a warning (a wrong token).
  void close(const std::string& why, bool loud) {
    if (closed_) return;
    closed_ = true;
    if (loud)
      log_of(LogSubsys::kStore).warn("store: closing connection from {}: {}", peer_, why);
    else
      log_of(LogSubsys::kStore).debug("store: closing connection from {}: {}", peer_, why);
    end_pending();
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
    out_.clear();
    pass_.release();
    // Last: this may drop the server's reference to us; handlers in flight hold their own.
    server_->sessions.erase(shared_from_this());
  }

  // A key this session's pending get/wait waits for has been set.
  void key_set(const std::string& key) {
    watching_.erase(key);
    if (!closed_ && pending_) try_complete();
  }

  const std::string& peer() const { return peer_; }

 private:
  void read_more() {
    if (reading_ || closed_) return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](auto ec, std::size_t n) {
      self->reading_ = false;
      if (self->closed_) return;
      if (ec) return self->close(ec == asio::error::eof ? "closed by the client" : ec.message(), false);
      self->decoder_.feed(std::string_view(self->buffer_.data(), n));
      // Bytes pile up only while a request waits or a reply is being written: a client that keeps
      // sending then is not ours (ours wait for each reply), so memory stays bounded by one message.
      if (self->decoder_.buffered() > self->max_payload() + kFrameHeaderSize + kIoChunk)
        return self->close("sent more than one message without waiting for the reply", false);
      self->process();
      self->read_more();
    });
  }

  std::size_t max_payload() const {
    return authenticated_ ? store::kMaxMessage : store::kMaxUnauthenticatedMessage;
  }

  // Handles buffered frames one at a time: never while a request waits or a reply is in flight.
  void process() {
    try {
      while (!closed_ && !pending_ && out_.empty() && !closing_) {
        auto frame = decoder_.next();
        if (!frame) return;
        if (frame->type != FrameType::kStore) throw ProtocolError(peer_ + ": not a store frame");
        handle(store::decode(frame->payload, peer_));
      }
    } catch (const Error& e) {
      close(e.what(), false);
    }
  }

  void handle(store::Message&& m) {
    if (!authenticated_) return authenticate(m);
    if (m.kind != store::Kind::kRequest) throw ProtocolError(peer_ + ": expected a store request");
    for (const auto& key : m.items)
      if (key.size() > store::kMaxKeySize) return reply_error("key of " + std::to_string(key.size()) + " bytes (maximum " +
                                                              std::to_string(store::kMaxKeySize) + ")");
    const bool one_key = m.items.size() == 1;
    switch (m.op) {
      case store::Op::kSet:
        if (!one_key) return reply_error("set takes one key");
        server_->data[m.items[0]] = std::move(m.data);
        reply_ok();
        return server_->notify(m.items[0]);
      case store::Op::kGet:
      case store::Op::kWait: {
        if (m.items.empty()) return reply_error(std::string(store::op_name(m.op)) + " takes at least one key");
        const auto timeout = std::min(std::chrono::milliseconds(m.timeout_ms), store::kMaxRequestTimeout);
        pending_ = std::move(m);
        arm_timer(timeout, [](StoreSession& s) { s.time_out(); });
        return try_complete();
      }
      case store::Op::kAdd: {
        if (!one_key) return reply_error("add takes one key");
        std::int64_t value = 0;
        if (auto it = server_->data.find(m.items[0]); it != server_->data.end()) {
          const auto current = parse_counter(it->second);
          if (!current) return reply_error("add: the value of '" + m.items[0] + "' is not an integer");
          value = *current;
        }
        if ((m.number > 0 && value > std::numeric_limits<std::int64_t>::max() - m.number) ||
            (m.number < 0 && value < std::numeric_limits<std::int64_t>::min() - m.number))
          return reply_error("add: '" + m.items[0] + "' would overflow");
        value += m.number;
        server_->data[m.items[0]] = std::to_string(value);
        store::Message r{.kind = store::Kind::kReply, .number = value};
        send(r);
        return server_->notify(m.items[0]);
      }
      case store::Op::kCheck: {
        if (m.items.empty()) return reply_error("check takes at least one key");
        bool all = true;
        for (const auto& key : m.items) all = all && server_->data.contains(key);
        store::Message r{.kind = store::Kind::kReply, .number = all ? 1 : 0};
        return send(r);
      }
      case store::Op::kDelete: {
        if (!one_key) return reply_error("delete takes one key");
        store::Message r{.kind = store::Kind::kReply, .number = server_->data.erase(m.items[0]) ? 1 : 0};
        return send(r);
      }
      case store::Op::kNone:
        break;
    }
    throw ProtocolError(peer_ + ": store request without an operation");
  }

  void authenticate(const store::Message& m) {
    if (m.kind != store::Kind::kAuth) throw ProtocolError(peer_ + ": first message is not authentication");
    if (!store::proofs_equal(m.data, store::client_proof(server_->token, nonce_))) {
      // Say why before closing, so a rank with a stale HVRUN_STORE_TOKEN gets a clear error.
      store::Message r{.kind = store::Kind::kReply, .status = store::Status::kError};
      r.data = "authentication failed: wrong store token (HVRUN_STORE_TOKEN of another job?)";
      closing_ = true;
      send(r);
      return server_->gate->note_refusal(peer_address_, "a wrong store token: HVRUN_STORE_TOKEN of another job?");
    }
    if (m.data2.size() != store::kNonceSize) throw ProtocolError(peer_ + ": authentication without a nonce");
    authenticated_ = true;
    pass_.release();  // no longer a stranger: not bounded, no authentication deadline
    decoder_.set_max_payload(store::kMaxMessage);
    store::Message ok{.kind = store::Kind::kAuthOk};
    ok.data = store::server_proof(server_->token, m.data2);
    send(ok);
  }

  // Answers the pending get/wait if every key exists; otherwise watches the missing ones.
  void try_complete() {
    HVRUN_INVARIANT(pending_.has_value());  // called only while a get/wait is pending
    const store::Message& req = *pending_;
    bool complete = true;
    for (const auto& key : req.items) {
      if (server_->data.contains(key)) continue;
      complete = false;
      if (watching_.insert(key).second) server_->watchers[key].push_back(weak_from_this());
    }
    if (!complete) return;
    store::Message r{.kind = store::Kind::kReply};
    if (req.op == store::Op::kGet) {
      r.items.reserve(req.items.size());
      for (const auto& key : req.items) r.items.push_back(server_->data.at(key));
    }
    end_pending();
    send(r);
  }

  void time_out() {
    if (!pending_) return;
    store::Message r{.kind = store::Kind::kReply, .status = store::Status::kTimeout};
    for (const auto& key : pending_->items)
      if (!server_->data.contains(key)) r.items.push_back(key);
    end_pending();
    send(r);
  }

  void end_pending() {
    pending_.reset();
    timer_generation_++;
    timer_.cancel();
    for (const auto& key : watching_) server_->unwatch(key, this);
    watching_.clear();
  }

  void reply_ok() { send(store::Message{.kind = store::Kind::kReply}); }

  void reply_error(const std::string& why) {
    store::Message r{.kind = store::Kind::kReply, .status = store::Status::kError};
    r.data = why;
    send(r);
  }

  void send(const store::Message& m) {
    if (closed_) return;
    std::string payload;
    try {
      payload = store::encode(m);
    } catch (const ProtocolError& e) {
      // A multi-get whose values do not fit one message: an error the client can act on.
      store::Message r{.kind = store::Kind::kReply, .status = store::Status::kError};
      r.data = std::string(e.what()) + "; ask for fewer keys at once";
      payload = store::encode(r);
    }
    out_.push_back(encode_frame(FrameType::kStore, payload));
    write_more();
  }

  void write_more() {
    if (writing_ || out_.empty() || closed_) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_.front()), [self = shared_from_this()](auto ec, std::size_t) {
      self->writing_ = false;
      if (self->closed_) return;
      if (ec) return self->close("write failed: " + ec.message(), false);
      self->out_.pop_front();
      if (self->out_.empty() && self->closing_) return self->close("wrong token", false);
      self->write_more();
      self->process();
    });
  }

  template <typename F>
  void arm_timer(std::chrono::milliseconds after, F on_expiry) {
    const auto generation = ++timer_generation_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), generation, on_expiry](auto ec) {
      if (ec || self->closed_ || generation != self->timer_generation_) return;
      on_expiry(*self);
    });
  }

  std::shared_ptr<StoreServerState> server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  std::string peer_;
  std::string peer_address_;  // for the gate's log lines: the address alone
  StrangerGate::Pass pass_;
  FrameDecoder decoder_;
  std::array<char, kIoChunk> buffer_{};
  std::deque<std::string> out_;
  std::string nonce_;
  std::optional<store::Message> pending_;
  std::unordered_set<std::string> watching_;
  bool authenticated_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool closing_ = false;  // reply queued, then close (authentication refused)
  bool closed_ = false;
};

void StoreServerState::accept(tcp::socket socket) {
  boost::system::error_code peer_ec;
  const auto remote = socket.remote_endpoint(peer_ec);
  if (peer_ec) return;  // already gone: the socket closes here
  auto session = std::make_shared<StoreSession>(shared_from_this(), std::move(socket), endpoint_text(remote),
                                                StrangerGate::address_text(remote.address()));
  sessions.insert(session);
  auto pass = gate->admit(remote.address(), [weak = std::weak_ptr<StoreSession>(session)](const std::string& why) {
    if (auto s = weak.lock()) s->close(why, false);
  });
  session->start(std::move(pass));
}

void StoreServerState::notify(const std::string& key) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  auto waiting = std::move(it->second);
  watchers.erase(it);
  for (auto& weak : waiting)
    if (auto s = weak.lock()) s->key_set(key);
}

void StoreServerState::unwatch(const std::string& key, const StoreSession* s) {
  auto it = watchers.find(key);
  if (it == watchers.end()) return;
  std::erase_if(it->second, [s](const std::weak_ptr<StoreSession>& w) {
    auto locked = w.lock();
    return !locked || locked.get() == s;
  });
  if (it->second.empty()) watchers.erase(it);
}

StoreServer::StoreServer(asio::io_context& io, std::string token, const std::string& bind_address,
                         std::uint16_t port, StoreServerOptions options)
    : state_(std::make_shared<StoreServerState>(io, std::move(token), options)) {
  if (state_->token.empty()) throw Error("store: refusing to serve without a token");
  auto listen = [&](const tcp::endpoint& ep, bool dual_stack) { return state_->listener->listen(ep, dual_stack); };
  boost::system::error_code ec;
  std::string where;
  if (bind_address.empty()) {
    // Every address: IPv6 dual-stack where the host has IPv6, else IPv4 only.
    where = "every address, port " + std::to_string(port);
    ec = listen(tcp::endpoint(tcp::v6(), port), true);
    if (ec) ec = listen(tcp::endpoint(tcp::v4(), port), false);
  } else {
    const auto address = asio::ip::make_address(bind_address, ec);
    if (ec) throw Error("store: '" + bind_address + "' is not an IP address: " + ec.message());
    const tcp::endpoint ep(address, port);
    where = endpoint_text(ep);
    ec = listen(ep, false);
  }
  if (ec) throw Error("store: cannot listen on " + where + ": " + ec.message());
  // A weak reference: the listener must not keep the state (and so itself) alive.
  state_->listener->start([weak = std::weak_ptr<StoreServerState>(state_)](tcp::socket socket) {
    if (auto self = weak.lock()) self->accept(std::move(socket));
  });
}

StoreServer::~StoreServer() { close(); }

std::uint16_t StoreServer::port() const { return state_->listener->port(); }

void StoreServer::close() {
  if (state_->closed) return;
  state_->closed = true;
  state_->listener->close();
  // StoreSession::close erases itself from the set, so walk a copy.
  auto sessions = state_->sessions;
  for (const auto& s : sessions) s->close("store closed", false);
  state_->sessions.clear();
  state_->watchers.clear();
}

std::size_t StoreServer::connection_count() const { return state_->sessions.size(); }
std::size_t StoreServer::unauthenticated_count() const { return state_->gate->waiting(); }
std::uint64_t StoreServer::refused_count() const { return state_->gate->dropped(); }
std::size_t StoreServer::key_count() const { return state_->data.size(); }

}  // namespace hvrun

#include "collectives/store_client.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <optional>
#include <thread>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/io_sizes.hpp"
#include "common/store_protocol.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// The server answers a get or wait at its deadline; the client waits this much longer for that answer
// before it gives up on the connection itself.
constexpr std::chrono::milliseconds kReplyGrace{5'000};
constexpr std::chrono::milliseconds kFirstBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{500};

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

std::chrono::milliseconds until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

}  // namespace

struct StoreClient::Impl {
  explicit Impl(StoreClientOptions o)
      : options(std::move(o)), endpoint(options.host + ":" + std::to_string(options.port)) {}

  StoreClientOptions options;
  std::string endpoint;
  std::mutex mutex;
  asio::io_context io;
  std::optional<tcp::socket> socket;
  std::optional<FrameDecoder> decoder;
  std::array<char, kIoChunk> buffer{};

  std::string where() const { return "store at " + endpoint; }

  // Runs the io_context until `done` or the deadline. At the deadline it closes the connection, which
  // cancels the operation, lets the cancelled handler run (it refers to the caller's locals) and
  // returns false.
  bool run_until(Clock::time_point deadline, const bool& done) {
    io.restart();
    io.run_until(deadline);
    if (done) return true;
    disconnect();
    io.restart();
    io.run();
    return false;
  }

  void disconnect() {
    if (socket) {
      boost::system::error_code ignored;
      socket->close(ignored);
    }
    decoder.reset();
  }

  void drop_connection() {
    disconnect();
    io.restart();
    io.run();
    socket.reset();
  }

  std::vector<tcp::endpoint> endpoints() {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options.host, ec);
    if (!ec) return {tcp::endpoint(address, options.port)};
    // A host name: resolved synchronously (getaddrinfo's own timeouts apply); the rank contract gives
    // an address, so this is for people who type one.
    tcp::resolver resolver(io);
    const auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec) throw Error(where() + ": cannot resolve '" + options.host + "': " + ec.message());
    return {results.begin(), results.end()};
  }

  void connect() {
    const auto deadline = Clock::now() + options.connect_timeout;
    const auto eps = endpoints();
    auto backoff = kFirstBackoff;
    std::string last_error = "no answer";
    for (;;) {
      socket.emplace(io);
      bool done = false;
      boost::system::error_code result;
      asio::async_connect(*socket, eps, [&](const boost::system::error_code& ec, const tcp::endpoint&) {
        result = ec;
        done = true;
      });
      if (!run_until(deadline, done)) break;
      if (!result) {
        boost::system::error_code ignored;
        socket->set_option(tcp::no_delay(true), ignored);
        decoder.emplace(where(), store::kMaxMessage);
        return authenticate(deadline);
      }
      // Refused or unreachable: the server may not be up yet.
      last_error = result.message();
      socket.reset();
      if (Clock::now() + backoff >= deadline) break;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    socket.reset();
    throw TimeoutError(where() + ": cannot connect within " + seconds_text(options.connect_timeout) + " (" +
                       last_error + "); is the job's store running?");
  }

  void authenticate(Clock::time_point deadline) {
    const store::Message hello = receive(deadline, "the server's greeting");
    if (hello.kind != store::Kind::kHello || hello.data.size() != store::kNonceSize) {
      drop_connection();
      throw ProtocolError(where() + ": not an hvrun store (unexpected greeting)");
    }
    if (hello.number != store::kProtocolVersion) {
      drop_connection();
      throw ProtocolError(where() + ": store protocol version " + std::to_string(hello.number) +
                          ", expected " + std::to_string(store::kProtocolVersion) +
                          "; use the same hvrun version everywhere");
    }
    store::Message auth{.kind = store::Kind::kAuth};
    auth.data = store::client_proof(options.token, hello.data);
    auth.data2 = store::random_nonce();
    send(auth, deadline);
    const store::Message answer = receive(deadline, "the answer to authentication");
    if (answer.kind == store::Kind::kReply && answer.status == store::Status::kError) {
      drop_connection();
      throw Error(where() + ": " + answer.data);
    }
    if (answer.kind != store::Kind::kAuthOk ||
        !store::proofs_equal(answer.data, store::server_proof(options.token, auth.data2))) {
      drop_connection();
      throw Error(where() + ": the server could not prove it holds the job token (another job's store?)");
    }
  }

  void send(const store::Message& m, Clock::time_point deadline) {
    const std::string frame = encode_frame(FrameType::kStore, store::encode(m));
    bool done = false;
    boost::system::error_code result;
    asio::async_write(*socket, asio::buffer(frame), [&](const boost::system::error_code& ec, std::size_t) {
      result = ec;
      done = true;
    });
    if (!run_until(deadline, done)) {
      drop_connection();
      throw TimeoutError(where() + ": could not send a request within " + seconds_text(until(deadline)));
    }
    if (result) {
      drop_connection();
      throw Error(where() + ": connection lost: " + result.message());
    }
  }

  store::Message receive(Clock::time_point deadline, const std::string& what) {
    const auto started = Clock::now();
    for (;;) {
      std::optional<Frame> frame;
      try {
        frame = decoder->next();
      } catch (const ProtocolError&) {
        drop_connection();
        throw;
      }
      if (frame) {
        if (frame->type != FrameType::kStore) {
          drop_connection();
          throw ProtocolError(where() + ": not an hvrun store (unexpected frame type)");
        }
        try {
          return store::decode(frame->payload, where());
        } catch (const ProtocolError&) {
          drop_connection();
          throw;
        }
      }
      bool done = false;
      boost::system::error_code result;
      std::size_t got = 0;
      socket->async_read_some(asio::buffer(buffer), [&](const boost::system::error_code& ec, std::size_t n) {
        result = ec;
        got = n;
        done = true;
      });
      if (!run_until(deadline, done)) {
        drop_connection();
        throw TimeoutError(where() + ": no answer within " +
                           seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started)) +
                           " waiting for " + what);
      }
      if (result) {
        drop_connection();
        throw Error(where() + ": connection lost waiting for " + what + ": " +
                    (result == asio::error::eof ? std::string("closed by the server") : result.message()));
      }
      decoder->feed(std::string_view(buffer.data(), got));
    }
  }

  // One request, one reply; reconnects first when an earlier call lost the connection.
  store::Message call(store::Message request, std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex);
    if (!socket) connect();
    if (timeout < std::chrono::milliseconds(0)) timeout = std::chrono::milliseconds(0);
    request.kind = store::Kind::kRequest;
    request.timeout_ms = static_cast<std::uint32_t>(std::min(timeout, store::kMaxRequestTimeout).count());
    const auto deadline = Clock::now() + timeout + kReplyGrace;
    send(request, deadline);
    store::Message reply = receive(deadline, std::string("the answer to ") + store::op_name(request.op));
    if (reply.kind != store::Kind::kReply) {
      drop_connection();
      throw ProtocolError(where() + ": expected a reply, got message kind " +
                          std::to_string(static_cast<int>(reply.kind)));
    }
    if (reply.status == store::Status::kTimeout)
      throw TimeoutError("store: timed out after " + seconds_text(timeout) +
                         " waiting for keys: " + join_keys(reply.items));
    if (reply.status == store::Status::kError) throw Error(where() + ": " + reply.data);
    return reply;
  }
};

StoreClient::StoreClient(StoreClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  if (impl_->options.token.empty()) throw Error(impl_->where() + ": no token (HVRUN_STORE_TOKEN is empty)");
  if (impl_->options.port == 0) throw Error(impl_->where() + ": port 0 is not a store's port");
  std::lock_guard lock(impl_->mutex);
  impl_->connect();
}

StoreClient::~StoreClient() = default;

void StoreClient::set(const std::string& key, std::string_view value) {
  store::Message m{.op = store::Op::kSet, .items = {key}};
  m.data = value;
  impl_->call(std::move(m), impl_->options.timeout);
}

std::string StoreClient::get(const std::string& key) { return get(key, impl_->options.timeout); }

std::string StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  return multi_get({key}, timeout).at(0);
}

std::vector<std::string> StoreClient::multi_get(const std::vector<std::string>& keys) {
  return multi_get(keys, impl_->options.timeout);
}

std::vector<std::string> StoreClient::multi_get(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout) {
  if (keys.empty()) return {};
  auto reply = impl_->call(store::Message{.op = store::Op::kGet, .items = keys}, timeout);
  if (reply.items.size() != keys.size())
    throw ProtocolError(impl_->where() + ": asked for " + std::to_string(keys.size()) + " values, got " +
                        std::to_string(reply.items.size()));
  return std::move(reply.items);
}

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, impl_->options.timeout); }

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  impl_->call(store::Message{.op = store::Op::kWait, .items = keys}, timeout);
}

std::int64_t StoreClient::add(const std::string& key, std::int64_t delta) {
  return impl_->call(store::Message{.op = store::Op::kAdd, .number = delta, .items = {key}}, impl_->options.timeout)
      .number;
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  return impl_->call(store::Message{.op = store::Op::kCheck, .items = keys}, impl_->options.timeout).number != 0;
}

bool StoreClient::remove(const std::string& key) {
  return impl_->call(store::Message{.op = store::Op::kDelete, .items = {key}}, impl_->options.timeout).number != 0;
}

const std::string& StoreClient::endpoint() const { return impl_->endpoint; }
const StoreClientOptions& StoreClient::options() const { return impl_->options; }

}  // namespace hvrun

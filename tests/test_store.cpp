// The rendezvous store: the wire format, what a client can do, and what a hostile or broken peer
// cannot do to the server (close only its own connection, never block or crash the rest).
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/store_protocol.hpp"
#include "common/unique_fd.hpp"
#include "collectives/store_client.hpp"
#include "tests/support/loopback_connection.hpp"
#include "tests/support/served_store.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
using hvrun::test::ServedStore;
using Clock = std::chrono::steady_clock;

namespace {

// A plain TCP connection to the store, for speaking the protocol wrongly on purpose.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port) : conn_(port) {}

  void send(std::string_view bytes) { conn_.send(bytes); }

  // The next store message, or nothing when the connection closed or the timeout passed.
  std::optional<store::Message> receive(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (auto f = decoder_.next()) return store::decode(f->payload, "server");
      if (!read_some(deadline)) return std::nullopt;
    }
  }

  // True when the server closed the connection within the timeout (bytes before that are dropped).
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (read_some(deadline)) {
    }
    return conn_.closed();
  }

  // Reads the greeting and authenticates with `token`.
  void authenticate(const std::string& token) {
    auto hello = receive(5s);
    REQUIRE(hello);
    REQUIRE(hello->kind == store::Kind::kHello);
    store::Message auth{.kind = store::Kind::kAuth};
    auth.data = store::client_proof(token, hello->data);
    auth.data2 = store::random_nonce();
    send(encode_frame(FrameType::kStore, store::encode(auth)));
    auto ok = receive(5s);
    REQUIRE(ok);
    REQUIRE(ok->kind == store::Kind::kAuthOk);
  }

 private:
  bool read_some(Clock::time_point deadline) {
    const auto bytes = conn_.read_some(deadline);
    if (bytes) decoder_.feed(*bytes);
    return bytes.has_value();
  }

  hvrun::test::LoopbackConnection conn_;
  FrameDecoder decoder_{"server", store::kMaxMessage};
};

// The server still serves a well-behaved client after whatever happened.
void check_server_alive(const ServedStore& served) {
  StoreClient client(served.client_options());
  client.set("alive", "yes");
  CHECK(client.get("alive") == "yes");
}

}  // namespace

TEST_CASE("store messages round-trip and malformed ones are errors, never crashes", "[store]") {
  store::Message m{.kind = store::Kind::kRequest, .op = store::Op::kGet, .timeout_ms = 1234, .number = -7};
  m.items = {"a", std::string("\0b", 2), ""};
  m.data = std::string(1000, '\xff');
  m.data2 = "x";
  const std::string bytes = store::encode(m);
  const store::Message back = store::decode(bytes, "peer");
  CHECK(back.kind == m.kind);
  CHECK(back.op == m.op);
  CHECK(back.timeout_ms == 1234);
  CHECK(back.number == -7);
  CHECK(back.items == m.items);
  CHECK(back.data == m.data);
  CHECK(back.data2 == "x");

  // Every truncation is an error naming the peer.
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7)
    CHECK_THROWS_WITH(store::decode(std::string_view(bytes).substr(0, cut), "peer 1"), Catch::Contains("peer 1"));
  CHECK_THROWS_AS(store::decode(bytes + "!", "p"), ProtocolError);
  // A huge item count in a tiny message is caught before anything is reserved.
  std::string lying = bytes.substr(0, 15) + std::string("\xff\xff\xff\xff", 4);
  CHECK_THROWS_WITH(store::decode(lying, "p"), Catch::Contains("item count"));
  // Random bytes: ProtocolError or a message, nothing else.
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    try {
      store::decode(junk, "fuzz");
    } catch (const ProtocolError&) {
    }
  }
  // Mutations of a valid message, too.
  for (int i = 0; i < 2000; ++i) {
    std::string mutated = bytes;
    mutated[rng() % mutated.size()] = static_cast<char>(rng());
    try {
      store::decode(mutated, "fuzz");
    } catch (const ProtocolError&) {
    }
  }
}

TEST_CASE("store proofs: both sides prove the token, compared in constant time", "[store]") {
  const std::string nonce = store::random_nonce();
  CHECK(nonce.size() == store::kNonceSize);
  CHECK(store::random_nonce() != nonce);
  CHECK(store::proofs_equal(store::client_proof("t", nonce), store::client_proof("t", nonce)));
  CHECK_FALSE(store::proofs_equal(store::client_proof("t", nonce), store::client_proof("u", nonce)));
  CHECK_FALSE(store::proofs_equal(store::client_proof("t", nonce), store::server_proof("t", nonce)));
  CHECK_FALSE(store::proofs_equal("abc", "ab"));
}

TEST_CASE("store: set, get, multi-get, check, add, remove", "[store]") {
  ServedStore served;
  StoreClient client(served.client_options());
  CHECK(client.endpoint() == "127.0.0.1:" + std::to_string(served.port()));
  const std::string binary("\0\x01\xff value", 9);
  client.set("k1", binary);
  CHECK(client.get("k1") == binary);
  client.set("k1", "replaced");
  CHECK(client.get("k1") == "replaced");
  client.set("empty", "");
  CHECK(client.get("empty").empty());
  const std::string big(1 << 20, 'b');
  client.set("big", big);
  CHECK(client.get("big") == big);
  client.set("k2", "two");
  CHECK(client.multi_get({"k2", "k1"}) == std::vector<std::string>{"two", "replaced"});
  CHECK(client.check({"k1", "k2"}));
  CHECK_FALSE(client.check({"k1", "nope"}));
  CHECK(client.add("n", 5) == 5);
  CHECK(client.add("n", -7) == -2);
  CHECK(client.get("n") == "-2");
  CHECK_THROWS_WITH(client.add("k1", 1), Catch::Contains("not an integer"));
  CHECK(client.remove("k2"));
  CHECK_FALSE(client.remove("k2"));
  CHECK_FALSE(client.check({"k2"}));
  // The connection survives an error reply.
  CHECK(client.get("k1") == "replaced");
  CHECK(served.on_io([](StoreServer& s) { return s.key_count(); }) == 4);  // k1, empty, big, n
}

TEST_CASE("store: a blocking get wakes when the key is set", "[store]") {
  ServedStore served;
  StoreClient waiter(served.client_options());
  StoreClient setter(served.client_options());
  std::thread later([&] {
    std::this_thread::sleep_for(150ms);
    setter.set("rank1/addr", "10.0.0.2");
    std::this_thread::sleep_for(50ms);
    setter.set("rank2/addr", "10.0.0.3");
  });
  const auto start = Clock::now();
  CHECK(waiter.get("rank1/addr", 10s) == "10.0.0.2");
  CHECK(Clock::now() - start >= 100ms);
  CHECK(waiter.multi_get({"rank1/addr", "rank2/addr"}, 10s) == std::vector<std::string>{"10.0.0.2", "10.0.0.3"});
  later.join();
  waiter.wait({"rank1/addr", "rank2/addr"}, 1s);
}

TEST_CASE("store: a timeout names the missing keys and leaves the connection usable", "[store]") {
  ServedStore served;
  StoreClient client(served.client_options());
  client.set("rank0/addr", "x");
  const auto start = Clock::now();
  CHECK_THROWS_WITH(client.wait({"rank0/addr", "rank3/addr"}, 300ms),
                    Catch::Equals("store: timed out after 0.3 s waiting for keys: rank3/addr"));
  CHECK(Clock::now() - start >= 300ms);
  CHECK_THROWS_AS(client.get("rank5/addr", 100ms), TimeoutError);
  CHECK_THROWS_WITH(client.multi_get({"a", "rank0/addr", "b"}, 0ms), Catch::EndsWith("waiting for keys: a, b"));
  CHECK(client.get("rank0/addr") == "x");
  // The server dropped the timed-out watchers: setting the key now wakes nobody and breaks nothing.
  client.set("rank3/addr", "y");
  CHECK(client.get("rank3/addr") == "y");
}

TEST_CASE("store: add is atomic across threads and clients", "[store]") {
  ServedStore served;
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      StoreClient client(served.client_options());
      for (int i = 0; i < kAdds; ++i) client.add("counter", 1);
    });
  for (auto& t : threads) t.join();
  StoreClient client(served.client_options());
  CHECK(client.add("counter", 0) == kThreads * kAdds);
}

TEST_CASE("store: one client shared by threads serialises its calls", "[store]") {
  ServedStore served;
  StoreClient shared(served.client_options());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        shared.set(key, key);
        CHECK(shared.get(key) == key);
      }
    });
  for (auto& t : threads) t.join();
}

namespace {
// Sends `auth` and then a set of `key` on `raw`: the server must answer with an error, close the
// connection, and never have served the set.
void check_refused(ServedStore& served, RawConnection& raw, const store::Message& auth, const std::string& key) {
  raw.send(encode_frame(FrameType::kStore, store::encode(auth)));
  store::Message set{.kind = store::Kind::kRequest, .op = store::Op::kSet, .items = {key}};
  raw.send(encode_frame(FrameType::kStore, store::encode(set)));
  auto answer = raw.receive(5s);
  REQUIRE(answer);
  CHECK(answer->status == store::Status::kError);
  CHECK(raw.closed_within(5s));
  StoreClient client(served.client_options());
  CHECK_FALSE(client.check({key}));
}
}  // namespace

TEST_CASE("store: a wrong token is refused, the connection closed, the server unharmed", "[store]") {
  ServedStore served;
  auto options = served.client_options();
  options.token = "not-the-token";
  CHECK_THROWS_WITH(StoreClient(options), Catch::Contains("wrong store token") &&
                                              Catch::Contains("127.0.0.1:" + std::to_string(served.port())));
  check_server_alive(served);

  // On the wire: a wrong proof gets an error and a close, and no request is served after it.
  RawConnection raw(served.port());
  auto hello = raw.receive(5s);
  REQUIRE(hello);
  store::Message auth{.kind = store::Kind::kAuth};
  auth.data = store::client_proof("wrong", hello->data);
  auth.data2 = store::random_nonce();
  check_refused(served, raw, auth, "stolen");
}

TEST_CASE("store: a proof replayed from another connection is refused", "[store]") {
  ServedStore served;
  const std::string token = served.client_options().token;
  // A listener on the wire sees one connection's challenge and its valid answer...
  RawConnection seen(served.port());
  auto challenge = seen.receive(5s);
  REQUIRE(challenge);
  store::Message auth{.kind = store::Kind::kAuth};
  auth.data = store::client_proof(token, challenge->data);
  auth.data2 = store::random_nonce();
  seen.send(encode_frame(FrameType::kStore, store::encode(auth)));
  auto accepted = seen.receive(5s);
  REQUIRE(accepted);
  REQUIRE(accepted->kind == store::Kind::kAuthOk);
  // ...and replays that answer on a connection of its own: the server's challenge differs, so it fails.
  RawConnection replay(served.port());
  auto other = replay.receive(5s);
  REQUIRE(other);
  CHECK(other->data != challenge->data);
  check_refused(served, replay, auth, "replayed");
}

TEST_CASE("store: a request before authentication closes the connection", "[store]") {
  ServedStore served;
  RawConnection raw(served.port());
  REQUIRE(raw.receive(5s));
  store::Message set{.kind = store::Kind::kRequest, .op = store::Op::kSet, .items = {"sneaky"}};
  raw.send(encode_frame(FrameType::kStore, store::encode(set)));
  CHECK(raw.closed_within(5s));
  StoreClient client(served.client_options());
  CHECK_FALSE(client.check({"sneaky"}));
}

TEST_CASE("store: garbage bytes close only that connection", "[store]") {
  ServedStore served;
  StoreClient bystander(served.client_options());
  bystander.set("before", "1");
  {
    RawConnection raw(served.port());
    raw.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(raw.closed_within(5s));
  }
  {
    // A valid frame holding a malformed message, after authenticating: closed as well.
    RawConnection raw(served.port());
    raw.authenticate(served.token());
    raw.send(encode_frame(FrameType::kStore, "\x04\x01"));
    CHECK(raw.closed_within(5s));
  }
  {
    // Random bytes after authenticating.
    RawConnection raw(served.port());
    raw.authenticate(served.token());
    std::mt19937 rng(7);
    std::string junk(4096, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    raw.send(junk);
    CHECK(raw.closed_within(5s));
  }
  CHECK(bystander.get("before") == "1");
  check_server_alive(served);
}

TEST_CASE("store: oversized frames close the connection without being buffered", "[store]") {
  ServedStore served;
  auto header_claiming = [](std::uint32_t length) {
    std::string frame = encode_frame(FrameType::kStore, "");
    for (int i = 0; i < 4; ++i) frame[8 + i] = static_cast<char>((length >> (24 - 8 * i)) & 0xff);
    return frame;
  };
  {
    // Before authentication only a small message is allowed.
    RawConnection raw(served.port());
    raw.send(header_claiming(static_cast<std::uint32_t>(store::kMaxUnauthenticatedMessage + 1)));
    CHECK(raw.closed_within(5s));
  }
  {
    RawConnection raw(served.port());
    raw.authenticate(served.token());
    raw.send(header_claiming(static_cast<std::uint32_t>(store::kMaxMessage + 1)));
    CHECK(raw.closed_within(5s));
  }
  {
    // A client that floods requests while one waits is not ours: closed once it exceeds one message.
    RawConnection raw(served.port());
    raw.authenticate(served.token());
    store::Message get{.kind = store::Kind::kRequest, .op = store::Op::kGet, .timeout_ms = 60000, .items = {"never"}};
    raw.send(encode_frame(FrameType::kStore, store::encode(get)));
    store::Message set{.kind = store::Kind::kRequest, .op = store::Op::kSet, .items = {"flood"}};
    set.data = std::string(1 << 20, 'f');
    const std::string frame = encode_frame(FrameType::kStore, store::encode(set));
    for (int i = 0; i < 12; ++i) raw.send(frame);
    CHECK(raw.closed_within(10s));
  }
  check_server_alive(served);
  CHECK(served.on_io([](StoreServer& s) { return s.connection_count(); }) <= 1);
}

TEST_CASE("store: a silent connection is closed at the authentication deadline", "[store]") {
  ServedStore served(StoreServerOptions{.auth_timeout = 300ms});
  RawConnection raw(served.port());
  const auto start = Clock::now();
  CHECK(raw.closed_within(5s));
  CHECK(Clock::now() - start >= 250ms);
  CHECK(served.on_io([](StoreServer& s) { return s.connection_count(); }) == 0);
  // An authenticated client may stay idle past that deadline.
  StoreClient client(served.client_options());
  std::this_thread::sleep_for(500ms);
  client.set("still", "here");
  CHECK(client.get("still") == "here");
}

TEST_CASE("store client: connects to a server that starts later, times out on none", "[store]") {
  // A port that was free a moment ago.
  std::uint16_t port = 0;
  {
    boost::asio::io_context io;
    StoreServer probe(io, "t", "127.0.0.1", 0);
    port = probe.port();
  }
  StoreClientOptions options{.host = "127.0.0.1", .port = port, .token = "job-token", .connect_timeout = 300ms};
  const auto start = Clock::now();
  CHECK_THROWS_WITH(StoreClient(options), Catch::Contains("store at 127.0.0.1:" + std::to_string(port)) &&
                                              Catch::Contains("cannot connect within 0.3 s"));
  CHECK(Clock::now() - start < 5s);

  options.connect_timeout = 10s;
  std::unique_ptr<StoreClient> client;
  std::thread connecting([&] { client = std::make_unique<StoreClient>(options); });
  std::this_thread::sleep_for(300ms);
  boost::asio::io_context io;
  StoreServer server(io, "job-token", "127.0.0.1", port);
  std::thread serving([&] { io.run(); });
  connecting.join();
  REQUIRE(client);
  client->set("late", "ok");
  CHECK(client->get("late") == "ok");
  // When the server goes away, a waiting get fails at once, not at its deadline.
  std::thread closing([&] {
    std::this_thread::sleep_for(200ms);
    boost::asio::post(io, [&] { server.close(); });
  });
  const auto waited = Clock::now();
  CHECK_THROWS_WITH(client->get("never", 30s), Catch::Contains("connection lost"));
  CHECK(Clock::now() - waited < 10s);
  closing.join();
  io.stop();
  serving.join();
}

TEST_CASE("store client: a server that is not a store is named as such", "[store]") {
  // An hvrun control peer (or anything else) on that port: garbage for the client.
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  UniqueFd guard(listener);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread fake([&] {
    UniqueFd conn(::accept(listener, nullptr, nullptr));
    const std::string hello = "SSH-2.0-OpenSSH_9.2\r\n";
    (void)!::send(conn.get(), hello.data(), hello.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(300ms);
  });
  StoreClientOptions options{.host = "127.0.0.1", .port = ntohs(addr.sin_port), .token = "t",
                             .connect_timeout = 5s};
  CHECK_THROWS_AS(StoreClient(options), ProtocolError);
  fake.join();
}

TEST_CASE("store server: refuses an empty token and names an address it cannot use", "[store]") {
  boost::asio::io_context io;
  CHECK_THROWS_WITH(StoreServer(io, "", "127.0.0.1"), Catch::Contains("without a token"));
  CHECK_THROWS_WITH(StoreServer(io, "t", "not-an-ip"), Catch::Contains("'not-an-ip' is not an IP address"));
  StoreServer first(io, "t", "127.0.0.1");
  // SO_REUSEADDR does not let a second listener take a port in use.
  CHECK_THROWS_WITH(StoreServer(io, "t", "127.0.0.1", first.port()),
                    Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(first.port())));
  StoreServer everywhere(io, "t", "");
  CHECK(everywhere.port() != 0);
}

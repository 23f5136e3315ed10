// Horovod's Gloo rendezvous server (common/horovod_rendezvous.hpp): what Horovod's HTTP client needs
// (PUT, GET, 404 while missing, DELETE, raw binary values, a case-exact Content-Length on every answer,
// one request per connection), and what a stranger or a runaway client cannot do (bounds, refused
// peers, slow requests).
#include <catch2/catch.hpp>

#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include "agent/rendezvous_knock.hpp"
#include "common/horovod_rendezvous.hpp"
#include "common/error.hpp"
#include "launcher/elastic/worker_notifier.hpp"
#include "launcher/ranks/horovod_rendezvous_plan.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/horovod_site.hpp"
#include "tests/support/loopback_connection.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The server on 127.0.0.1, run by its own io thread as the agent runs it inside its loop.
class ServedRendezvous {
 public:
  explicit ServedRendezvous(std::set<std::string> allowed = {"127.0.0.1"}, HorovodRendezvousLimits limits = {},
                            std::optional<HorovodElasticHooks> elastic = std::nullopt)
      : server_(io_, HorovodRendezvousOptions{"127.0.0.1", 0, std::move(allowed), limits, std::move(elastic)}),
        port_(server_.port()),
        thread_([this] { io_.run(); }) {}
  ~ServedRendezvous() {
    boost::asio::post(io_, [this] {
      server_.close();
      work_.reset();
      io_.stop();
    });
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

  template <typename F>
  auto on_io(F f) -> decltype(f(std::declval<HorovodRendezvous&>())) {
    std::packaged_task<decltype(f(std::declval<HorovodRendezvous&>()))()> task([&] { return f(server_); });
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }

 private:
  boost::asio::io_context io_;
  // The loop runs until the destructor, even when a test has closed the server and nothing is pending.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{io_.get_executor()};
  HorovodRendezvous server_;
  std::uint16_t port_;
  std::thread thread_;
};

// A plain TCP connection speaking bytes, as Horovod's client (third_party/HTTPRequest) does.
class Connection {
 public:
  explicit Connection(std::uint16_t port) : conn_(port) {}

  void send(std::string_view bytes) { conn_.send(bytes); }

  // One whole response (header and Content-Length bytes of body), or what came before the connection
  // closed or 10 s passed.
  std::string response() {
    const auto deadline = Clock::now() + 10s;
    for (;;) {
      const auto end = in_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const auto cl = in_.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) {
          const std::size_t length = std::stoul(in_.substr(cl + 16));
          if (in_.size() >= end + 4 + length) {
            std::string r = in_.substr(0, end + 4 + length);
            in_.erase(0, r.size());
            return r;
          }
        }
      }
      if (!read_some(deadline)) return std::exchange(in_, {});
    }
  }

  // True when the server closed the connection within 10 s; the bytes that came first are kept.
  bool closed() {
    const auto deadline = Clock::now() + 10s;
    while (read_some(deadline)) {
    }
    return conn_.closed();
  }
  const std::string& received() const { return in_; }

 private:
  bool read_some(Clock::time_point deadline) {
    const auto bytes = conn_.read_some(deadline);
    if (bytes) in_ += *bytes;
    return bytes.has_value();
  }

  hvrun::test::LoopbackConnection conn_;
  std::string in_;
};

// Exactly the request Horovod's client writes: a new connection, HTTP/1.1, Host, Content-Length always.
std::string request(const std::string& method, const std::string& path, const std::string& body = {}) {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string round_trip(std::uint16_t port, const std::string& bytes) {
  Connection c(port);
  c.send(bytes);
  return c.response();
}

std::string status_line(const std::string& response) { return response.substr(0, response.find("\r\n")); }

std::string body_of(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : response.substr(end + 4);
}

}  // namespace

TEST_CASE("horovod rendezvous: PUT, GET, 404 while missing, DELETE, binary values", "[horovod_rendezvous]") {
  ServedRendezvous served;
  const auto port = served.port();

  const auto missing = round_trip(port, request("GET", "/global/rank_0"));
  CHECK(status_line(missing) == "HTTP/1.1 404 Not Found");
  // An empty 200 for a missing key would abort Horovod's ranks; a 404 needs its Content-Length: 0.
  CHECK_THAT(missing, Catch::Contains("\r\nContent-Length: 0\r\n"));

  const std::string value("addr\0\x01\xff\0tail", 11);
  const auto put = round_trip(port, request("PUT", "/global/rank_0", value));
  CHECK(status_line(put) == "HTTP/1.1 200 OK");
  CHECK_THAT(put, Catch::Contains("\r\nContent-Length: 0\r\n"));

  const auto got = round_trip(port, request("GET", "/global/rank_0"));
  CHECK(status_line(got) == "HTTP/1.1 200 OK");
  CHECK_THAT(got, Catch::Contains("\r\nContent-Length: 11\r\n"));  // the header name exactly so
  CHECK(body_of(got) == value);

  // Scopes are part of the key: the same name in another scope is another key.
  CHECK(status_line(round_trip(port, request("GET", "/local_node-a/rank_0"))) == "HTTP/1.1 404 Not Found");
  CHECK(status_line(round_trip(port, request("PUT", "/local_node-a_process_set_hash_1f/rank_0", "x"))) ==
        "HTTP/1.1 200 OK");
  CHECK(served.on_io([](HorovodRendezvous& s) { return s.key_count(); }) == 2);

  // A second PUT replaces the value.
  round_trip(port, request("PUT", "/global/rank_0", "v2"));
  CHECK(body_of(round_trip(port, request("GET", "/global/rank_0"))) == "v2");

  CHECK(status_line(round_trip(port, request("DELETE", "/global/rank_0"))) == "HTTP/1.1 200 OK");
  CHECK(status_line(round_trip(port, request("GET", "/global/rank_0"))) == "HTTP/1.1 404 Not Found");
  CHECK(status_line(round_trip(port, request("DELETE", "/global/never"))) == "HTTP/1.1 200 OK");
  CHECK(served.on_io([](HorovodRendezvous& s) { return s.key_count(); }) == 1);

  SECTION("a body that arrives in a later segment, and keep-alive") {
    Connection c(port);
    c.send("PUT /global/split HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc");
    std::this_thread::sleep_for(50ms);
    c.send("def");
    CHECK(status_line(c.response()) == "HTTP/1.1 200 OK");
    c.send(request("GET", "/global/split"));  // the same connection answers again
    CHECK(body_of(c.response()) == "abcdef");
  }
  SECTION("a client that closes without a request costs nothing") {
    { Connection idle(port); }
    CHECK(status_line(round_trip(port, request("GET", "/global/rank_0"))) == "HTTP/1.1 404 Not Found");
  }
}

TEST_CASE("horovod rendezvous: bounds on headers, values, keys and total size", "[horovod_rendezvous]") {
  HorovodRendezvousLimits limits;
  limits.max_header = 1024;
  limits.max_value = 100;
  limits.max_keys = 3;
  limits.max_total = 250;
  ServedRendezvous served({"127.0.0.1"}, limits);
  const auto port = served.port();
  const auto keys = [&] { return served.on_io([](HorovodRendezvous& s) { return s.key_count(); }); };

  CHECK(status_line(round_trip(port, request("PUT", "/g/too_big", std::string(101, 'v')))) ==
        "HTTP/1.1 413 Payload Too Large");
  CHECK(status_line(round_trip(port, request("PUT", "/g/" + std::string(2000, 'k'), "v"))) ==
        "HTTP/1.1 431 Request Header Fields Too Large");
  CHECK(keys() == 0);

  CHECK(status_line(round_trip(port, request("PUT", "/g/a", std::string(100, 'a')))) == "HTTP/1.1 200 OK");
  CHECK(status_line(round_trip(port, request("PUT", "/g/b", std::string(100, 'b')))) == "HTTP/1.1 200 OK");
  // 2 × (4 + 100) held: 43 more bytes would pass 250, 42 just fit.
  const auto over_total = round_trip(port, request("PUT", "/g/c", std::string(39, 'c')));
  CHECK(status_line(over_total) == "HTTP/1.1 507 Insufficient Storage");
  CHECK_THAT(body_of(over_total), Catch::Contains("250 bytes"));
  CHECK(status_line(round_trip(port, request("PUT", "/g/c", std::string(38, 'c')))) == "HTTP/1.1 200 OK");
  // Replacing a value counts its old size out.
  CHECK(status_line(round_trip(port, request("PUT", "/g/a", std::string(100, 'A')))) == "HTTP/1.1 200 OK");
  const auto fourth = round_trip(port, request("PUT", "/g/d", ""));
  CHECK(status_line(fourth) == "HTTP/1.1 507 Insufficient Storage");
  CHECK_THAT(body_of(fourth), Catch::Contains("3 keys"));
  // DELETE frees a key's room.
  round_trip(port, request("DELETE", "/g/b"));
  CHECK(status_line(round_trip(port, request("PUT", "/g/d", ""))) == "HTTP/1.1 200 OK");
  CHECK(keys() == 3);
  CHECK(body_of(round_trip(port, request("GET", "/g/a"))) == std::string(100, 'A'));

  CHECK(status_line(round_trip(port, request("POST", "/g/a", "x"))) == "HTTP/1.1 405 Method Not Allowed");
  Connection garbage(port);
  garbage.send("\x16\x03\x01 not http at all\r\n\r\n");
  CHECK(garbage.closed());
}

TEST_CASE("horovod rendezvous: strangers and slow clients", "[horovod_rendezvous]") {
  SECTION("a peer that is not one of the job's hosts is closed unanswered") {
    ServedRendezvous served({"192.0.2.7"});
    Connection c(served.port());
    c.send(request("PUT", "/global/rank_0", "evil"));
    CHECK(c.closed());
    CHECK(c.received().empty());
    CHECK(served.on_io([](HorovodRendezvous& s) { return s.key_count(); }) == 0);
    CHECK(served.on_io([](HorovodRendezvous& s) { return s.refused_count(); }) == 1);
  }
  SECTION("a request that does not come whole within the deadline ends its connection") {
    HorovodRendezvousLimits limits;
    limits.request_timeout = 200ms;
    ServedRendezvous served({"127.0.0.1"}, limits);
    Connection c(served.port());
    c.send("PUT /global/slow HTTP/1.1\r\nContent-Length: 10\r\n\r\nab");
    CHECK(c.closed());
    CHECK(served.on_io([](HorovodRendezvous& s) { return s.key_count(); }) == 0);
  }
  SECTION("connections beyond the bound are closed unanswered; the others go on") {
    HorovodRendezvousLimits limits;
    limits.max_connections = 1;
    ServedRendezvous served({"127.0.0.1"}, limits);
    Connection first(served.port());
    while (served.on_io([](HorovodRendezvous& s) { return s.connection_count(); }) == 0)
      std::this_thread::sleep_for(5ms);
    Connection second(served.port());
    CHECK(second.closed());
    first.send(request("GET", "/global/x"));
    CHECK(status_line(first.response()) == "HTTP/1.1 404 Not Found");
  }
  SECTION("close() forgets every key and ends every connection") {
    ServedRendezvous served;
    round_trip(served.port(), request("PUT", "/global/k", "v"));
    Connection open(served.port());
    while (served.on_io([](HorovodRendezvous& s) { return s.connection_count(); }) == 0)
      std::this_thread::sleep_for(5ms);
    served.on_io([](HorovodRendezvous& s) {
      s.close();
      return 0;
    });
    CHECK(open.closed());
    CHECK(served.on_io([](HorovodRendezvous& s) { return s.key_count() + s.connection_count(); }) == 0);
  }
}

TEST_CASE("horovod rendezvous: IPv4 only, and never for nobody", "[horovod_rendezvous]") {
  boost::asio::io_context io;
  CHECK_THROWS_WITH(HorovodRendezvous(io, HorovodRendezvousOptions{"::1", 0, {"::1"}, {}, std::nullopt}),
                    Catch::Contains("'::1' is not an IPv4 address"));
  CHECK_THROWS_WITH(HorovodRendezvous(io, HorovodRendezvousOptions{"127.0.0.1", 0, {}, {}, std::nullopt}),
                    Catch::Contains("no allowed peers"));
  HorovodRendezvous first(io, HorovodRendezvousOptions{"127.0.0.1", 0, {"127.0.0.1"}, {}, std::nullopt});
  CHECK_THROWS_WITH(HorovodRendezvous(io, HorovodRendezvousOptions{"127.0.0.1", first.port(), {"127.0.0.1"}, {}, std::nullopt}),
                    Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(first.port())));
}

TEST_CASE("horovod rendezvous plan: rank 0's chosen NIC, IPv4, every job host's addresses", "[horovod_rendezvous]") {
  const InterfaceInfo lo{"lo", {"127.0.0.1", "::1"}, {8, 128}, true, true, true, false, -1, {}};
  const InterfaceInfo docker{"docker0", {"172.17.0.1"}, {16}, true, true, false, true, -1, {}};
  const InterfaceInfo fabric_a{"enp6s0", {"fd77::10", "10.77.0.10"}, {64, 24}, true, true, false, false, 10000, {}};
  const InterfaceInfo fabric_b{"enp5s0", {"10.77.0.11", "fe80::1%enp5s0"}, {24, 64}, true, true, false, false, 10000, {}};
  const std::vector<InterfaceInfo> a{lo, docker, fabric_a}, b{lo, docker, fabric_b};

  const auto v4 = plan_horovod_rendezvous("enp6s0", "10.77.0.10", a, {a, b});
  REQUIRE(v4);
  CHECK(v4->address == "10.77.0.10");
  CHECK(v4->allowed_peers == std::vector<std::string>{"10.77.0.10", "10.77.0.11", "127.0.0.1", "172.17.0.1"});
  // An IPv6 choice: Horovod's client needs the same NIC's IPv4 address.
  const auto v6 = plan_horovod_rendezvous("enp6s0", "fd77::10", a, {a, b});
  REQUIRE(v6);
  CHECK(v6->address == "10.77.0.10");
  const InterfaceInfo v6_only{"ib0", {"fd77::12"}, {64}, true, true, false, false, -1, {}};
  CHECK_FALSE(plan_horovod_rendezvous("ib0", "fd77::12", {v6_only}, {{v6_only}, b}));
}

namespace {

// What the elastic hooks saw, on the server's io thread.
struct ElasticSeen {
  std::vector<std::pair<std::string, int>> asked;  // rank_and_size requests, in order
  std::vector<std::function<void(std::string)>> answers;
  std::vector<std::pair<std::string, HorovodWorkerAddresses>> registered;  // "HOST:LOCAL_RANK", addresses
  std::vector<int> published;  // ranks that PUT /global/RANK
};

HorovodElasticHooks hooks_into(ElasticSeen& seen) {
  HorovodElasticHooks hooks;
  hooks.rank_and_size = [&seen](const std::string& host, int local_rank, std::function<void(std::string)> answer) {
    seen.asked.emplace_back(host, local_rank);
    seen.answers.push_back(std::move(answer));
  };
  hooks.worker_addresses = [&seen](const std::string& host, int local_rank, HorovodWorkerAddresses a) {
    seen.registered.emplace_back(host + ":" + std::to_string(local_rank), std::move(a));
  };
  hooks.global_rank_published = [&seen](int rank) { seen.published.push_back(rank); };
  return hooks;
}

}  // namespace

TEST_CASE("horovod rendezvous, elastic: rank_and_size held until the driver answers, worker_addresses decoded",
          "[horovod_rendezvous][elastic]") {
  ElasticSeen seen;
  ServedRendezvous served({"127.0.0.1"}, {}, hooks_into(seen));
  const auto port = served.port();

  Connection held(port);
  held.send(request("GET", "/rank_and_size/lab-1.example:1"));
  const auto deadline = Clock::now() + 10s;
  while (served.on_io([&](HorovodRendezvous&) { return seen.asked.size(); }) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  REQUIRE(served.on_io([&](HorovodRendezvous&) { return seen.asked; }) ==
          std::vector<std::pair<std::string, int>>{{"lab-1.example", 1}});
  // The store keeps answering others meanwhile.
  CHECK(status_line(round_trip(port, request("PUT", "/global/rank_0", "x"))) == "HTTP/1.1 200 OK");
  served.on_io([&](HorovodRendezvous&) {
    seen.answers[0]("2,4,1,2,1,2");
    seen.answers[0]("ignored: only the first answer counts");
    return 0;
  });
  const std::string answer = held.response();
  CHECK(status_line(answer) == "HTTP/1.1 200 OK");
  CHECK(body_of(answer) == "2,4,1,2,1,2");

  // A new assignment forgets every scope.
  served.on_io([](HorovodRendezvous& s) {
    s.clear_keys();
    return 0;
  });
  CHECK(status_line(round_trip(port, request("GET", "/global/rank_0"))) == "HTTP/1.1 404 Not Found");

  const auto bad_slot = round_trip(port, request("GET", "/rank_and_size/lab1"));
  CHECK(status_line(bad_slot) == "HTTP/1.1 400 Bad Request");
  CHECK(body_of(bad_slot) == "'/rank_and_size/lab1' does not end in HOST:LOCAL_RANK");
  const auto bad_value = round_trip(port, request("PUT", "/worker_addresses/lab1:0", "Y29zCnN5c3RlbQo="));
  CHECK(status_line(bad_value) == "HTTP/1.1 400 Bad Request");
  CHECK_THAT(body_of(bad_value), Catch::Contains("the worker lab1:0 at 127.0.0.1:"));
  CHECK_THAT(body_of(bad_value), Catch::Contains("opcode 0x63, which hvrun does not read"));
  CHECK(status_line(round_trip(port, request("GET", "/worker_addresses/lab1:0"))) == "HTTP/1.1 404 Not Found");
  CHECK(served.on_io([&](HorovodRendezvous&) { return seen.registered.size(); }) == 0);

  // Gloo's global rendezvous: a rank publishing its address under /global/RANK is reported, and stored as
  // any PUT; other keys of that scope or of others (a process set's, local, cross) are not reported.
  for (const char* key : {"/global/2", "/global/rank_0", "/global/-1", "/global/", "/global_process_set_hash_ab/3",
                          "/local_lab1/0", "/cross_0/1", "/global/0"})
    CHECK(status_line(round_trip(port, request("PUT", key, "addr"))) == "HTTP/1.1 200 OK");
  CHECK(body_of(round_trip(port, request("GET", "/global/2"))) == "addr");
  CHECK(served.on_io([&](HorovodRendezvous&) { return seen.published; }) == std::vector<int>{2, 0});
}

TEST_CASE("horovod rendezvous, elastic: Horovod's own worker registers its notification service and hears hvrun",
          "[integration][elastic]") {
  const auto site = hvrun::test::horovod_site();
  if (!site) {
    WARN(hvrun::test::horovod_missing());
    return;
  }
  ElasticSeen seen;
  ServedRendezvous served({"127.0.0.1"}, {}, hooks_into(seen));
  hvrun::test::ChildProcess worker({hvrun::test::kDebianPython, hvrun::test::source_dir() + "/tests/horovod/elastic_worker_peer.py",
                                    "127.0.0.1", std::to_string(served.port()), "lab-2", "3"},
                                   {"PYTHONPATH=" + *site});
  REQUIRE(worker.wait_for_stdout("registered", 1, 60s));
  const auto registered = served.on_io([&](HorovodRendezvous&) { return seen.registered; });
  REQUIRE(registered.size() == 1);
  CHECK(registered[0].first == "lab-2:3");
  CHECK(registered[0].second.key.size() == kHorovodSecretSize);
  CHECK(status_line(round_trip(served.port(), request("GET", "/worker_addresses/lab-2:3"))) == "HTTP/1.1 200 OK");

  boost::asio::io_context io;
  WorkerNotifier notifier(io);
  std::optional<WorkerNotice> notice;
  notifier.notify(registered[0].second, 1764700001, HorovodHostUpdate::kMixed, 10s,
                  [&](WorkerNotice n) { notice = std::move(n); });
  io.run_for(15s);
  REQUIRE(notice);
  INFO(notice->detail);
  CHECK(notice->acked);
  auto r = worker.wait(30s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("updated 1764700001 3 HostUpdateResult"));
}

TEST_CASE("horovod rendezvous: a knock with an expected token lets its source in, once; strangers learn nothing",
          "[horovod_rendezvous]") {
  ServedRendezvous served({"192.0.2.7"});  // this test's 127.0.0.1 is a stranger
  const std::string token = HorovodRendezvous::new_knock_token();
  CHECK(token.size() == HorovodRendezvous::kKnockTokenSize);
  CHECK(token != HorovodRendezvous::new_knock_token());
  auto knocked_from = std::make_shared<std::vector<std::string>>();
  served.on_io([&](HorovodRendezvous& s) {
    s.expect_knock(token, [knocked_from](const std::string& a) { knocked_from->push_back(a); });
    return 0;
  });
  CHECK_THROWS_WITH(served.on_io([](HorovodRendezvous& s) {
                      s.expect_knock("abc", [](const std::string&) {});
                      return 0;
                    }),
                    Catch::Contains("64 characters"));

  // While a knock is expected, a stranger is read for one knock and nothing else.
  for (const std::string& bytes :
       {request("GET", "/global/x"), request("PUT", "/hvrun/knock", std::string(64, '0')),
        request("PUT", "/hvrun/knock", token + "0"), request("GET", "/hvrun/knock", token),
        "PUT /hvrun/knock HTTP/1.1\r\nX: " + std::string(600, 'x') + "\r\n\r\n"}) {
    INFO(bytes.substr(0, 40));
    Connection c(served.port());
    c.send(bytes);
    CHECK(c.closed());
    CHECK(c.received().empty());
  }
  CHECK(knocked_from->empty());

  const std::string ok = round_trip(served.port(), request("PUT", "/hvrun/knock", token));
  CHECK(status_line(ok) == "HTTP/1.1 200 OK");
  CHECK(*knocked_from == std::vector<std::string>{"127.0.0.1"});
  // Its source is in from now on; the token is spent.
  CHECK(status_line(round_trip(served.port(), request("GET", "/global/x"))) == "HTTP/1.1 404 Not Found");
  CHECK(status_line(round_trip(served.port(), request("PUT", "/hvrun/knock", token))) == "HTTP/1.1 403 Forbidden");
  CHECK(knocked_from->size() == 1);

  // A forgotten token is refused like any other.
  const std::string forgotten = HorovodRendezvous::new_knock_token();
  served.on_io([&](HorovodRendezvous& s) {
    s.expect_knock(forgotten, [knocked_from](const std::string& a) { knocked_from->push_back(a); });
    s.forget_knock(forgotten);
    return 0;
  });
  CHECK(status_line(round_trip(served.port(), request("PUT", "/hvrun/knock", forgotten))) == "HTTP/1.1 403 Forbidden");
  CHECK(knocked_from->size() == 1);
}

TEST_CASE("horovod rendezvous: strangers that may only knock have their own small bound and a short deadline",
          "[horovod_rendezvous]") {
  ServedRendezvous served({"192.0.2.7"});  // this test's 127.0.0.1 is a stranger
  const std::string token = HorovodRendezvous::new_knock_token();
  auto knocked = std::make_shared<int>(0);
  served.on_io([&](HorovodRendezvous& s) {
    s.expect_knock(token, [knocked](const std::string&) { ++*knocked; });
    return 0;
  });
  const auto count = [&] { return served.on_io([](HorovodRendezvous& s) { return s.connection_count(); }); };

  // 64 silent strangers are held (far below the 4096 the workers' connections may use); the next is
  // closed unanswered at once, so that strangers can never crowd the workers out.
  std::vector<std::unique_ptr<Connection>> silent;
  for (int i = 0; i < 64; ++i) silent.push_back(std::make_unique<Connection>(served.port()));
  const auto until = Clock::now() + 5s;
  while (count() < 64 && Clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(count() == 64);
  const auto refused_before = served.on_io([](HorovodRendezvous& s) { return s.refused_count(); });
  Connection over(served.port());
  over.send(request("PUT", "/hvrun/knock", token));
  CHECK(over.closed());
  CHECK(over.received().empty());
  CHECK(served.on_io([](HorovodRendezvous& s) { return s.refused_count(); }) == refused_before + 1);
  CHECK(*knocked == 0);

  // A silent stranger is let go after about 2 s, not the 10 s a worker's request may take.
  const auto start = Clock::now();
  CHECK(silent.front()->closed());
  CHECK(Clock::now() - start < 6s);
  silent.clear();
  const auto drained = Clock::now() + 5s;
  while (count() > 0 && Clock::now() < drained) std::this_thread::sleep_for(5ms);
  CHECK(count() == 0);

  // With the strangers gone, the knock is answered.
  CHECK(status_line(round_trip(served.port(), request("PUT", "/hvrun/knock", token))) == "HTTP/1.1 200 OK");
  CHECK(*knocked == 1);
}

TEST_CASE("rendezvous knock (agent): 200 is ok; a spent token, nobody listening, a silent listener are named",
          "[horovod_rendezvous]") {
  ServedRendezvous served({"192.0.2.7"});
  const std::string token = HorovodRendezvous::new_knock_token();
  served.on_io([&](HorovodRendezvous& s) {
    s.expect_knock(token, [](const std::string&) {});
    return 0;
  });
  auto knock = [](std::uint16_t port, const std::string& t, int timeout_ms) {
    boost::asio::io_context io;
    std::optional<KnockResultMsg> result;
    RendezvousKnock k(io, KnockMsg{"127.0.0.1", port, t, timeout_ms}, [&](KnockResultMsg r) { result = r; });
    io.run();
    REQUIRE(result);
    return *result;
  };
  const KnockResultMsg ok = knock(served.port(), token, 5000);
  CHECK(ok.ok);
  CHECK(ok.detail.empty());
  const KnockResultMsg spent = knock(served.port(), token, 5000);  // 127.0.0.1 is allowed now
  CHECK_FALSE(spent.ok);
  CHECK(spent.detail == "answered 403");

  const std::string other = HorovodRendezvous::new_knock_token();
  ServedRendezvous stranger_side({"192.0.2.7"});
  stranger_side.on_io([&](HorovodRendezvous& s) {
    s.expect_knock(other, [](const std::string&) {});
    return 0;
  });
  const KnockResultMsg wrong = knock(stranger_side.port(), token, 5000);
  CHECK_FALSE(wrong.ok);
  CHECK_THAT(wrong.detail, Catch::Contains("closed unanswered"));

  // A listener that accepts and never answers: the knock's one deadline.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent(io, {boost::asio::ip::make_address_v4("127.0.0.1"), 0});
  const std::uint16_t silent_port = silent.local_endpoint().port();
  const auto t0 = Clock::now();
  const KnockResultMsg timed_out = knock(silent_port, token, 300);
  CHECK_FALSE(timed_out.ok);
  CHECK_THAT(timed_out.detail, Catch::Contains("no answer within"));
  CHECK(Clock::now() - t0 < 5s);
  silent.close();
  const KnockResultMsg nobody = knock(silent_port, token, 5000);
  CHECK_FALSE(nobody.ok);
  CHECK_THAT(nobody.detail, Catch::Contains("refused"));
}

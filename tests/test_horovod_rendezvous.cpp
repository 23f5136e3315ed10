// Horovod's Gloo rendezvous server (common/horovod_rendezvous.hpp): what Horovod's HTTP client needs
// (PUT, GET, 404 while missing, DELETE, raw binary values, a case-exact Content-Length on every answer,
// one request per connection), and what a stranger or a runaway client cannot do (bounds, refused
// peers, slow requests). The elastic driver's hooks and the knock: test_horovod_rendezvous_elastic.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/horovod_rendezvous.hpp"
#include "launcher/ranks/horovod_rendezvous_plan.hpp"
#include "tests/support/served_rendezvous.hpp"

using namespace hvrun;
using namespace hvrun::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

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
    HttpConnection c(port);
    c.send("PUT /global/split HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc");
    std::this_thread::sleep_for(50ms);
    c.send("def");
    CHECK(status_line(c.response()) == "HTTP/1.1 200 OK");
    c.send(request("GET", "/global/split"));  // the same connection answers again
    CHECK(body_of(c.response()) == "abcdef");
  }
  SECTION("a client that closes without a request costs nothing") {
    { HttpConnection idle(port); }
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
  HttpConnection garbage(port);
  garbage.send("\x16\x03\x01 not http at all\r\n\r\n");
  CHECK(garbage.closed());
}

TEST_CASE("horovod rendezvous: strangers and slow clients", "[horovod_rendezvous]") {
  SECTION("a peer that is not one of the job's hosts is closed unanswered") {
    ServedRendezvous served({"192.0.2.7"});
    HttpConnection c(served.port());
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
    HttpConnection c(served.port());
    c.send("PUT /global/slow HTTP/1.1\r\nContent-Length: 10\r\n\r\nab");
    CHECK(c.closed());
    CHECK(served.on_io([](HorovodRendezvous& s) { return s.key_count(); }) == 0);
  }
  SECTION("connections beyond the bound are closed unanswered; the others go on") {
    HorovodRendezvousLimits limits;
    limits.max_connections = 1;
    ServedRendezvous served({"127.0.0.1"}, limits);
    HttpConnection first(served.port());
    while (served.on_io([](HorovodRendezvous& s) { return s.connection_count(); }) == 0)
      std::this_thread::sleep_for(5ms);
    HttpConnection second(served.port());
    CHECK(second.closed());
    first.send(request("GET", "/global/x"));
    CHECK(status_line(first.response()) == "HTTP/1.1 404 Not Found");
  }
  SECTION("close() forgets every key and ends every connection") {
    ServedRendezvous served;
    round_trip(served.port(), request("PUT", "/global/k", "v"));
    HttpConnection open(served.port());
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

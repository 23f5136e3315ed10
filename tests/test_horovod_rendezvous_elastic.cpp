// Horovod's Gloo rendezvous server (common/horovod_rendezvous.hpp) for an elastic job and for newcomers:
// the elastic driver's hooks (rank_and_size held, worker_addresses decoded, Horovod's own worker told of
// a host change), and the knock that lets a newcomer's source address in (server and agent sides).
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "agent/rendezvous_knock.hpp"
#include "common/horovod_rendezvous.hpp"
#include "launcher/elastic/worker_notifier.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/horovod_site.hpp"
#include "tests/support/served_rendezvous.hpp"

using namespace hvrun;
using namespace hvrun::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

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

  HttpConnection held(port);
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
    HttpConnection c(served.port());
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

TEST_CASE("horovod rendezvous: strangers that may only knock have their own small bounds and a short deadline, "
          "and cannot keep a knock out",
          "[horovod_rendezvous]") {
  ServedRendezvous served({"192.0.2.7"});  // this test's 127.0.0.1 is a stranger
  const std::string token = HorovodRendezvous::new_knock_token();
  auto knocked = std::make_shared<int>(0);
  served.on_io([&](HorovodRendezvous& s) {
    s.expect_knock(token, [knocked](const std::string&) { ++*knocked; });
    return 0;
  });
  const auto count = [&] { return served.on_io([](HorovodRendezvous& s) { return s.connection_count(); }); };
  const auto refused = [&] { return served.on_io([](HorovodRendezvous& s) { return s.refused_count(); }); };

  // 8 silent strangers from one address are held (far below the 4096 the workers' connections may use);
  // each further one from there closes the oldest, so that strangers can never crowd the workers out.
  std::vector<std::unique_ptr<HttpConnection>> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(std::make_unique<HttpConnection>(served.port()));
  const auto until = Clock::now() + 5s;
  while (count() < 8 && Clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(count() == 8);
  const auto refused_before = refused();
  HttpConnection ninth(served.port());
  CHECK(silent.front()->closed());
  CHECK(silent.front()->received().empty());
  CHECK(refused() == refused_before + 1);
  CHECK(count() == 8);

  // A knock from the same address as the flood still gets in (the oldest silent one makes room) and is
  // answered.
  CHECK(status_line(round_trip(served.port(), request("PUT", "/hvrun/knock", token))) == "HTTP/1.1 200 OK");
  CHECK(*knocked == 1);

  // A silent stranger is let go after about 2 s, not the 10 s a worker's request may take.
  const auto start = Clock::now();
  CHECK(silent.back()->closed());
  CHECK(Clock::now() - start < 6s);
  silent.clear();
  const auto drained = Clock::now() + 5s;
  while (count() > 0 && Clock::now() < drained) std::this_thread::sleep_for(5ms);
  CHECK(count() == 0);
}

TEST_CASE("horovod rendezvous: an allowed address's idle connections are bounded at 1,024, the oldest closed for "
          "the new one, which is served",
          "[horovod_rendezvous]") {
  ServedRendezvous served({"127.0.0.1"});
  const auto count = [&] { return served.on_io([](HorovodRendezvous& s) { return s.connection_count(); }); };
  std::vector<std::unique_ptr<HttpConnection>> idle;
  for (int i = 0; i < 1024; ++i) idle.push_back(std::make_unique<HttpConnection>(served.port()));
  const auto until = Clock::now() + 10s;
  while (count() < 1024 && Clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(count() == 1024);
  HttpConnection newest(served.port());
  CHECK(idle.front()->closed());
  CHECK(idle.front()->received().empty());
  newest.send(request("GET", "/global/missing", ""));
  CHECK(status_line(newest.response()) == "HTTP/1.1 404 Not Found");
  CHECK(served.on_io([](HorovodRendezvous& s) { return s.refused_count(); }) == 1);
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

// The listeners' bounds for strangers (common/stranger_gate.hpp, common/throttled_log.hpp,
// common/tcp_listener.hpp), on loopback sockets: unauthenticated connections capped per address and in
// all (the oldest closed for the newest), the deadline to authenticate, the accept loop's back-off on
// EMFILE, and refusals logged a few times with a count.
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/resource.h>
#include <unistd.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/local_hostname.hpp"
#include "common/log.hpp"
#include "common/stranger_gate.hpp"
#include "common/tcp_listener.hpp"
#include "common/throttled_log.hpp"

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using hvrun::LogSubsys;
using hvrun::StrangerGate;
using hvrun::StrangerLimits;
using hvrun::TcpListener;
using namespace std::chrono_literals;

namespace {

// Sends every hvrun logger to a string for the test's lifetime, then back to stderr.
class CapturedLog {
 public:
  CapturedLog() {
    hvrun::init_log("hvrun-agent: ", [this] { return std::make_shared<spdlog::sinks::ostream_sink_st>(out_); });
  }
  ~CapturedLog() {
    hvrun::init_log(hvrun::kHvrunLogPrefix);
    hvrun::set_log_threshold(hvrun::LogLevel::info, hvrun::all_log_subsystems());
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::size_t lines_with(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(part) != std::string::npos;
  return n;
}

// A listener on 127.0.0.1 whose every connection takes a pass from `gate`; a connection the gate
// drops is closed. pass(i) gives the i-th accepted connection's pass back (it "authenticated").
struct GatedServer {
  asio::io_context io;
  std::shared_ptr<TcpListener> listener = std::make_shared<TcpListener>(io, "test server", LogSubsys::kStore);
  std::shared_ptr<StrangerGate> gate;
  struct Served {
    std::shared_ptr<tcp::socket> socket;
    StrangerGate::Pass pass;
  };
  std::vector<Served> served;

  explicit GatedServer(StrangerLimits limits)
      : gate(std::make_shared<StrangerGate>(io, "the test port", LogSubsys::kStore, limits)) {
    REQUIRE(!listener->listen(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), false));
    listener->start([this](tcp::socket s) {
      auto socket = std::make_shared<tcp::socket>(std::move(s));
      const auto peer = socket->remote_endpoint().address();
      auto pass = gate->admit(peer, [weak = std::weak_ptr<tcp::socket>(socket)](const std::string&) {
        if (auto sk = weak.lock()) sk->close();
      });
      served.push_back({socket, std::move(pass)});
    });
  }
  ~GatedServer() { listener->close(); }

  // A client from `from` (any 127.x.y.z), connected; runs the loop until the server has accepted it.
  tcp::socket connect(const std::string& from) {
    tcp::socket c(io);
    c.open(tcp::v4());
    c.bind(tcp::endpoint(asio::ip::make_address(from), 0));
    c.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), listener->port()));
    const std::size_t before = served.size();
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (served.size() == before && std::chrono::steady_clock::now() < until) io.run_for(10ms);
    REQUIRE(served.size() == before + 1);
    return c;
  }
  // Whether the server has closed `c`: its read ends (EOF or reset) within `wait`.
  bool closed(tcp::socket& c, std::chrono::milliseconds wait = 500ms) {
    io.run_for(wait);
    c.non_blocking(true);
    char byte;
    boost::system::error_code ec;
    c.read_some(asio::buffer(&byte, 1), ec);
    return ec && ec != asio::error::would_block;
  }
};

}  // namespace

TEST_CASE("stranger gate: over the bound for one address, that address's oldest unauthenticated connection "
          "is closed for the new one; authenticated ones do not count",
          "[stranger_gate]") {
  CapturedLog log;
  GatedServer server(StrangerLimits{.per_peer = 3, .total = 100, .deadline = 60s});
  std::vector<tcp::socket> flood;
  for (int i = 0; i < 3; ++i) flood.push_back(server.connect("127.0.0.2"));
  auto rank = server.connect("127.0.0.3");  // another address: not affected
  CHECK(server.gate->waiting_from(asio::ip::make_address("127.0.0.2")) == 3);
  server.served[0].pass.release();  // the first one authenticates: no longer counted
  CHECK(server.gate->waiting_from(asio::ip::make_address("127.0.0.2")) == 2);
  for (int i = 0; i < 5; ++i) flood.push_back(server.connect("127.0.0.2"));
  CHECK(server.gate->waiting_from(asio::ip::make_address("127.0.0.2")) == 3);
  CHECK(server.gate->dropped() == 4);
  CHECK_FALSE(server.closed(flood[0], 0ms));  // authenticated: kept
  CHECK(server.closed(flood[1]));            // the oldest unauthenticated ones went first
  CHECK(server.closed(flood[2], 0ms));
  CHECK(server.closed(flood[3], 0ms));
  CHECK(server.closed(flood[4], 0ms));
  CHECK_FALSE(server.closed(flood[5], 0ms));
  CHECK_FALSE(server.closed(flood[6], 0ms));
  CHECK_FALSE(server.closed(flood[7], 0ms));
  CHECK_FALSE(server.closed(rank, 0ms));
  // The first refusal is said at once, the rest with a count a second later: two lines, not four.
  server.io.run_for(1200ms);
  const std::string text = log.text();
  INFO(text);
  CHECK(lines_with(text, "refused") == 2);
  CHECK(lines_with(text, "hvrun-agent: refused a connection from 127.0.0.2 to the test port (over the limit of 3 "
                         "unauthenticated connections from one address; the oldest is closed for each new one); if "
                         "127.0.0.2 is not a host of this job, block it from this port with a firewall") == 1);
  CHECK(lines_with(text, "hvrun-agent: refused 3 connections from 127.0.0.2 to the test port (over the limit of 3 ") ==
        1);
}

TEST_CASE("stranger gate: over the bound in all, the oldest unauthenticated connection of any address is closed",
          "[stranger_gate]") {
  CapturedLog log;
  GatedServer server(StrangerLimits{.per_peer = 3, .total = 4, .deadline = 60s});
  auto a1 = server.connect("127.0.0.2");
  auto a2 = server.connect("127.0.0.2");
  auto b1 = server.connect("127.0.0.3");
  auto c1 = server.connect("127.0.0.4");
  auto d1 = server.connect("127.0.0.5");  // the fifth: a1 goes
  CHECK(server.gate->waiting() == 4);
  CHECK(server.closed(a1));
  CHECK_FALSE(server.closed(a2, 0ms));
  CHECK_FALSE(server.closed(d1, 0ms));
  server.io.run_for(1200ms);
  CHECK(lines_with(log.text(), "refused a connection from 127.0.0.2 to the test port (over the limit of 4 "
                               "unauthenticated connections from all addresses") == 1);
}

TEST_CASE("stranger gate: a connection that does not authenticate within the deadline is closed; one that does "
          "is kept",
          "[stranger_gate]") {
  CapturedLog log;
  GatedServer server(StrangerLimits{.per_peer = 10, .total = 10, .deadline = 300ms});
  auto silent = server.connect("127.0.0.2");
  auto proven = server.connect("127.0.0.2");
  server.served[1].pass.release();
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(server.closed(silent, 100ms));
  CHECK(server.closed(silent, 400ms));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK_FALSE(server.closed(proven, 0ms));
  CHECK(server.gate->waiting() == 0);
  CHECK(lines_with(log.text(), "refused a connection from 127.0.0.2 to the test port (no complete handshake within "
                               "0.3 s)") == 1);
}

TEST_CASE("stranger gate: the bounds are clamped to a quarter of the open files limit", "[stranger_gate]") {
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_max, 400);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  asio::io_context io;
  StrangerGate gate(io, "the test port", LogSubsys::kStore, StrangerLimits{.per_peer = 1024, .total = 4096});
  ::setrlimit(RLIMIT_NOFILE, &saved);
  CHECK(gate.limits().total == low.rlim_cur / 4);
  CHECK(gate.limits().per_peer == low.rlim_cur / 4);
}

TEST_CASE("tcp listener: out of descriptors, accept is retried after a pause that doubles, and the errors are "
          "logged a few times with a count",
          "[stranger_gate]") {
  CapturedLog log;
  asio::io_context io;
  auto listener = std::make_shared<TcpListener>(io, "test server", LogSubsys::kStore);
  REQUIRE(!listener->listen(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), false));
  std::vector<tcp::socket> clients;  // completed by the kernel, waiting in the backlog
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back(io);
    clients.back().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), listener->port()));
  }
  std::vector<tcp::socket> accepted;  // kept open: a closed one would free a descriptor under the limit
  // No descriptor left for accept: the soft limit at the lowest free descriptor.
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  const int lowest_free = ::dup(0);
  REQUIRE(lowest_free >= 0);
  ::close(lowest_free);
  rlimit none = saved;
  none.rlim_cur = static_cast<rlim_t>(lowest_free);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &none) == 0);
  listener->start([&](tcp::socket s) { accepted.push_back(std::move(s)); });
  io.run_for(700ms);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  // 10, 20, 40, ... ms: about 7 tries in 700 ms (a hot loop makes hundreds of thousands).
  INFO("accept errors: " << listener->accept_errors());
  CHECK(listener->accept_errors() >= 4);
  CHECK(listener->accept_errors() <= 12);
  CHECK(listener->pause() >= 320ms);  // 10 ms doubled at each error
  // With descriptors again, the next retry (within a second) takes the waiting connections.
  io.run_for(1500ms);
  CHECK(accepted.size() == 4);
  CHECK(listener->pause().count() == 0);
  const std::string text = log.text();
  INFO(text);
  CHECK(lines_with(text, "accepting a connection failed") == 2);  // the first at once, then the count
  CHECK(lines_with(text, "test server on " + hvrun::local_hostname() + " (127.0.0.1:" +
                             std::to_string(listener->port()) + "): accepting a connection failed: Too many open files (retrying after a pause of up to "
                             "1000 ms; if this is 'Too many open files', raise the hard open files limit, "
                             "ulimit -Hn)") == 1);
  CHECK(lines_with(text, "accepting a connection failed " + std::to_string(listener->accept_errors() - 1) +
                             " times: Too many open files") == 1);
  listener->close();
}

TEST_CASE("throttled log: the first event at once, then one line per kind with its count; counts read 2,997",
          "[stranger_gate]") {
  CapturedLog log;
  asio::io_context io;
  auto throttled = std::make_shared<hvrun::ThrottledLog>(io, LogSubsys::kStore, 100ms, 300ms);
  auto line = [](const std::string& peer) {
    return [peer](std::uint64_t n) { return "refused " + hvrun::count_text(n) + " from " + peer; };
  };
  for (int i = 0; i < 2998; ++i) throttled->note("a", line("a"));
  throttled->note("b", line("b"));
  CHECK(log.text() == "hvrun-agent: refused 1 from a\nhvrun-agent: refused 1 from b\n");
  io.run_for(200ms);  // the loop is out of work (stopped) once the summary is said: restart() below
  CHECK(log.text() == "hvrun-agent: refused 1 from a\nhvrun-agent: refused 1 from b\nhvrun-agent: refused 2,997 from a\n");
  // Later counts wait for the longer period, and a quiet kind says nothing more.
  throttled->note("a", line("a"));
  io.restart();
  io.run_for(100ms);
  CHECK(lines_with(log.text(), "from a") == 2);
  io.run_for(300ms);
  CHECK(lines_with(log.text(), "refused 1 from a") == 2);
  CHECK(throttled->total() == 3000);
  CHECK(hvrun::count_text(0) == "0");
  CHECK(hvrun::count_text(999) == "999");
  CHECK(hvrun::count_text(1000) == "1,000");
  CHECK(hvrun::count_text(1234567) == "1,234,567");
}

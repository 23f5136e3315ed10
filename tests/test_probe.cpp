// Probing in one process over loopback: identity, HMAC and the classification of outcomes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>
#include <utility>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <thread>

#include "common/frame_codec.hpp"
#include "common/interface_list.hpp"
#include "common/job_secret.hpp"
#include "common/probe_message.hpp"
#include "agent/probe_listener.hpp"
#include "agent/prober.hpp"

using namespace hvrun;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
std::vector<ProbeResultMsg> probe_all(asio::io_context& io, Prober& prober, const std::vector<ProbeAddress>& targets,
                                      std::chrono::milliseconds timeout) {
  std::vector<ProbeResultMsg> results;
  prober.probe(targets, timeout, [&](ProbeResultMsg r) { results.push_back(std::move(r)); });
  const auto deadline = std::chrono::steady_clock::now() + timeout + 2s;
  while (results.size() < targets.size() && std::chrono::steady_clock::now() < deadline) io.run_one_for(100ms);
  return results;
}
}  // namespace

TEST_CASE("probes tell the right host, the wrong host, a refusal and a forged answer apart", "[probe]") {
  asio::io_context io;
  const JobSecret secret = JobSecret::generate();
  ProbeListener self(io), peer(io), stranger(io);
  self.identify(secret, 0, "a");
  peer.identify(secret, 1, "b");
  stranger.identify(JobSecret::generate(), 2, "c");  // another job's secret
  // A port with nobody listening: bind, remember, close.
  asio::ip::tcp::acceptor closed(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const int closed_port = closed.local_endpoint().port();
  closed.close();

  Prober prober(io, secret);
  const auto results = probe_all(io, prober,
                                 {{1, "lo", "127.0.0.1", peer.port()},
                                  {3, "lo", "127.0.0.1", self.port()},  // expected host 3, host 0 answers
                                  {2, "lo", "127.0.0.1", stranger.port()},
                                  {4, "lo", "127.0.0.1", closed_port},
                                  {5, "lo", "::1", peer.port()}},
                                 1000ms);
  REQUIRE(results.size() == 5);
  std::map<int, ProbeResultMsg> by_host;
  for (const auto& r : results) by_host[r.host] = r;
  CHECK(by_host[1].outcome == ProbeOutcome::kOk);
  CHECK(by_host[3].outcome == ProbeOutcome::kWrongHost);
  CHECK(by_host[3].answered_as == 0);
  CHECK(by_host[2].outcome == ProbeOutcome::kAuthFailed);
  CHECK(by_host[4].outcome == ProbeOutcome::kRefused);
  // host 5 is really host 1 over IPv6 loopback: wrong host, answered as 1.
  CHECK(by_host[5].outcome == ProbeOutcome::kWrongHost);
  CHECK(by_host[5].answered_as == 1);
}

TEST_CASE("a listener that never answers costs one probe timeout for all its probes", "[probe]") {
  asio::io_context io;
  const JobSecret secret = JobSecret::generate();
  // Accepts connections and never reads or answers; counts them.
  asio::ip::tcp::acceptor mute(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  std::vector<asio::ip::tcp::socket> held;
  std::function<void()> accept_next = [&] {
    mute.async_accept([&](boost::system::error_code ec, asio::ip::tcp::socket s) {
      if (ec) return;
      held.push_back(std::move(s));
      accept_next();
    });
  };
  accept_next();
  Prober prober(io, secret);
  std::vector<ProbeAddress> targets;
  for (int h = 0; h < 8; ++h) targets.push_back({h, "lo", "127.0.0.1", mute.local_endpoint().port()});
  // Concurrent probes are all connected before the first of them times out; probes one after another
  // would have one connection when the first result (its timeout) comes. An order, not a duration: the
  // loopback connects have the whole second of the timeout to happen however loaded the machine is.
  std::optional<std::size_t> connected_at_first_result;
  std::vector<ProbeResultMsg> results;
  prober.probe(targets, 1000ms, [&](ProbeResultMsg r) {
    if (!connected_at_first_result) connected_at_first_result = held.size();
    results.push_back(std::move(r));
  });
  while (results.size() < targets.size() && io.run_one_for(5s) > 0) {
  }
  REQUIRE(results.size() == 8);
  for (const auto& r : results) CHECK(r.outcome == ProbeOutcome::kTimeout);
  REQUIRE(connected_at_first_result);
  CHECK(*connected_at_first_result == 8);
}

TEST_CASE("the probe listener drops garbage, oversized and silent connections and keeps serving", "[probe]") {
  asio::io_context io;
  const JobSecret secret = JobSecret::generate();
  ProbeListener listener(io);
  listener.identify(secret, 7, "g");
  std::thread server([&] { io.run_for(4s); });

  auto talk = [&](const std::string& bytes) {
    asio::io_context cio;
    asio::ip::tcp::socket s(cio);
    s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), listener.port()));
    if (!bytes.empty()) asio::write(s, asio::buffer(bytes));
    std::string got;
    std::array<char, 256> buf;
    boost::system::error_code ec;
    for (;;) {
      const std::size_t n = s.read_some(asio::buffer(buf), ec);
      if (ec) break;
      got.append(buf.data(), n);
    }
    return got;
  };
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(talk("GET / HTTP/1.0\r\n\r\n").empty());
  CHECK(talk(encode_frame(FrameType::kControl, std::string(4000, 'x'))).empty());
  CHECK(talk(encode_frame(FrameType::kControl, R"({"nonce":"zz"})")).empty());
  // A nonce of the wrong size, and a challenge of another version, get no answer either.
  CHECK(talk(encode_frame(FrameType::kControl, encode_probe_challenge(ProbeChallenge{std::string(31, 'n')}))).empty());
  CHECK(talk(encode_frame(FrameType::kControl, R"({"type":"probe_challenge","version":2,"nonce":")" +
                                                   hex_encode(std::string(32, 'n')) + R"("})"))
            .empty());
  CHECK(talk("").empty());  // silent: closed after the listener's patience
  CHECK(std::chrono::steady_clock::now() - t0 < ProbeListener::kPatience + 1s);
  // A replayed answer to another nonce does not verify.
  const std::string nonce(32, 'n');
  const std::string answer = talk(encode_frame(FrameType::kControl, encode_probe_challenge(ProbeChallenge{nonce})));
  CHECK_FALSE(answer.empty());
  FrameDecoder d("listener");
  d.feed(answer);
  auto frame = d.next();
  REQUIRE(frame);
  const ProbeAnswer a = decode_probe_answer(frame->payload, "listener");
  CHECK(a.host == 7);
  CHECK(a.hostname == "g");
  const std::string& mac = a.mac;
  CHECK(secret.verify(probe_mac_input(nonce, 7), mac));
  CHECK_FALSE(secret.verify(probe_mac_input(std::string(32, 'm'), 7), mac));
  CHECK_FALSE(secret.verify(probe_mac_input(nonce, 6), mac));
  io.stop();
  server.join();
}

TEST_CASE("own_addresses: every address list_interfaces gives, from getifaddrs alone", "[probe]") {
  // The agent answers a probe towards one of its own addresses (docker0's 172.17.0.1 on every host) at
  // once with own_addresses(); list_interfaces() is what the hello reports. They must not disagree.
  std::vector<std::string> listed;
  for (const InterfaceInfo& nic : list_interfaces()) listed.insert(listed.end(), nic.addresses.begin(), nic.addresses.end());
  std::vector<std::string> own = own_addresses();
  std::sort(listed.begin(), listed.end());
  std::sort(own.begin(), own.end());
  CHECK(own == listed);
  CHECK(std::find(own.begin(), own.end(), "127.0.0.1") != own.end());
}

TEST_CASE("random_bytes: the requested length, and not the same twice", "[probe]") {
  CHECK(random_bytes(0).empty());
  const std::string a = random_bytes(32), b = random_bytes(32);
  CHECK(a.size() == 32);
  CHECK(a != b);
  CHECK(random_bytes(4096).size() == 4096);  // above getrandom's 256-byte uninterruptible size
  CHECK(JobSecret::generate().hex() != JobSecret::generate().hex());
}

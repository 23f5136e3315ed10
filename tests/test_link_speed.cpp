// The link test: its verdict on recorded figures (launcher/nic/link_speed.hpp), its messages, and one
// sender against the probe listener over loopback (agent/link_tester.hpp, agent/probe_listener.hpp).
#include <catch2/catch.hpp>

#include <utility>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <thread>
#include <atomic>
#include <boost/asio/write.hpp>
#include <vector>

#include "agent/link_tester.hpp"
#include "agent/probe_listener.hpp"
#include "common/control_message.hpp"
#include "common/error.hpp"
#include "common/frame_codec.hpp"
#include "common/job_secret.hpp"
#include "common/probe_message.hpp"
#include "launcher/check/check_report.hpp"
#include "launcher/nic/link_speed.hpp"
#include <nlohmann/json.hpp>

using namespace hvrun;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// A figure of `mb` MB/s over a quarter second.
LinkFigure fig(std::size_t from, std::size_t to, double mb) {
  return LinkFigure{from, to, std::llround(mb * 250'000), 250'000, {}};
}

std::vector<LinkHost> lab(std::size_t n) {
  std::vector<LinkHost> hosts;
  for (std::size_t i = 0; i < n; ++i)
    hosts.push_back({"lab" + std::to_string(i), "eth1", "10.9.0." + std::to_string(i + 1)});
  return hosts;
}

std::vector<LinkFigure> ring(const std::vector<double>& rates) {
  std::vector<LinkFigure> out;
  const auto pairs = link_ring(rates.size() == 2 ? 2 : rates.size());
  for (std::size_t k = 0; k < pairs.size(); ++k) out.push_back(fig(pairs[k].first, pairs[k].second, rates[k]));
  return out;
}

}  // namespace

TEST_CASE("link test: the ring of the host list", "[link]") {
  CHECK(link_ring(0).empty());
  CHECK(link_ring(1).empty());
  CHECK(link_ring(2) == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {1, 0}});
  CHECK(link_ring(3) == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {1, 2}, {2, 0}});
}

TEST_CASE("link test: alike links are not warned about", "[link]") {
  const auto figures = ring({910, 1020, 870, 990, 940});
  const LinkJudgement j = judge_links(figures, 5);
  CHECK(j.degraded.empty());
  CHECK(j.named.empty());
  CHECK(j.reference > 900);
  CHECK(link_warnings(figures, lab(5)).empty());
  // Slow, but all alike: nothing to compare against.
  CHECK(link_warnings(ring({4.8, 5.1, 4.9}), lab(3)).empty());
}

TEST_CASE("link test: one slow host is named with its figures", "[link]") {
  // lab2's link is shaped: lab1 -> lab2 and lab2 -> lab0 are slow; the pairs' median would be slow too.
  const auto figures = ring({930, 4.8, 5.1});
  const LinkJudgement j = judge_links(figures, 3);
  CHECK(j.named == std::vector<std::size_t>{2});
  CHECK(j.degraded == std::vector<std::size_t>{1, 2});
  const auto lines = link_warnings(figures, lab(3));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "lab2 eth1 (10.9.0.3): 4.8 MB/s from lab1 and 5.1 MB/s to lab0, the others 930+ MB/s: "
                    "a degraded link? (tc, ethtool eth1: speed/duplex)");
  // At five hosts as well.
  const auto five = link_warnings(ring({900, 950, 6, 7, 920}), lab(5));
  REQUIRE(five.size() == 1);
  CHECK(five[0].rfind("lab3 eth1 (10.9.0.4): 6.0 MB/s from lab2 and 7.0 MB/s to lab4", 0) == 0);
}

TEST_CASE("link test: one slow pair is named as a pair", "[link]") {
  const auto figures = ring({900, 12, 880, 940});
  const LinkJudgement j = judge_links(figures, 4);
  CHECK(j.named.empty());
  CHECK(j.degraded == std::vector<std::size_t>{1});
  const auto lines = link_warnings(figures, lab(4));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "lab1 eth1 (10.9.0.2) to lab2: 12.0 MB/s, the others 880+ MB/s: a degraded link between them? "
                    "(tc, ethtool eth1: speed/duplex)");
}

TEST_CASE("link test: a pair without a figure is named with its reason and left out of the comparison", "[link]") {
  auto figures = ring({900, 950, 920});
  figures[1] = LinkFigure{1, 2, 0, 0, "no answer within 2 s"};
  const LinkJudgement j = judge_links(figures, 3);
  CHECK(j.failed == std::vector<std::size_t>{1});
  CHECK(j.degraded.empty());
  CHECK(j.named.empty());
  const auto lines = link_warnings(figures, lab(3));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "no link figure from lab1 eth1 (10.9.0.2) to lab2 eth1 (10.9.0.3): no answer within 2 s");
}

TEST_CASE("link test: two hosts and one host", "[link]") {
  // Two hosts, one direction slow: that pair is named, neither host (each has a fast pair).
  const auto two = ring({5, 900});
  const LinkJudgement j = judge_links(two, 2);
  CHECK(j.named.empty());
  CHECK(j.degraded == std::vector<std::size_t>{0});
  CHECK(link_warnings(two, lab(2)).size() == 1);
  CHECK(link_warnings(ring({900, 880}), lab(2)).empty());
  // One host: no pair, nothing to say.
  CHECK(judge_links({}, 1).reference == 0);
  CHECK(link_warnings({}, lab(1)).empty());
}

TEST_CASE("link test: --check-only shows each pair's figure, and --json carries it", "[link][check]") {
  CheckInput in;
  in.links = ring({930, 4.8, 5.1, 920});
  in.links.push_back(LinkFigure{3, 1, 0, 0, "no answer within 2 s"});
  in.link_hosts = lab(4);
  const CheckReport report(in);
  const std::string text = report.summary(100);
  CHECK_THAT(text, Catch::Contains("lab3 -> lab1  no figure: no answer within 2 s"));
  CHECK_THAT(text, Catch::Contains("lab1 -> lab2  4.8 MB/s"));
  CHECK_THAT(text, Catch::Contains("lab2 eth1 (10.9.0.3): 4.8 MB/s from lab1 and 5.1 MB/s to lab3"));
  const auto links = nlohmann::json::parse(report.json()).at("links");
  REQUIRE(links.size() == 5);
  CHECK(links[4].at("from") == "lab3");
  CHECK(links[4].at("to") == "lab1");
  CHECK(links[4].at("interface") == "eth1");
  CHECK(links[4].at("to_address") == "10.9.0.2");
  CHECK(links[4].at("mb_per_s").is_null());
  CHECK(links[4].at("error") == "no answer within 2 s");
  CHECK(links[1].at("bytes") == 1'200'000);
  CHECK(links[1].at("seconds") == Approx(0.25));
  CHECK(links[1].at("mb_per_s").get<double>() == Approx(4.8));
  CHECK(links[1].at("error").is_null());
  // Without the test: an empty list, and no links section.
  CHECK(nlohmann::json::parse(CheckReport(CheckInput{}).json()).at("links").empty());
  CHECK_THAT(CheckReport(CheckInput{}).summary(100), !Catch::Contains("links, each host"));
}

TEST_CASE("link test: messages round-trip, and no probe message passes for one", "[link][wire]") {
  const std::string nonce(kProbeNonceSize, '\x01');
  const std::string mac(kProbeMacSize, '\x02');
  CHECK(decode_link_hello(encode_link_hello(LinkHello{nonce}), "p") == LinkHello{nonce});
  CHECK(decode_link_challenge(encode_link_challenge(LinkChallenge{3, nonce, mac}), "p") == LinkChallenge{3, nonce, mac});
  CHECK(decode_link_start(encode_link_start(LinkStart{mac}), "p") == LinkStart{mac});
  CHECK(decode_link_count(encode_link_count(LinkCount{4 << 20}), "p") == LinkCount{4 << 20});
  // Each type is its own: a probe's challenge is no link hello, and a hello no probe challenge.
  CHECK_THROWS_AS(decode_link_hello(encode_probe_challenge(ProbeChallenge{nonce}), "p"), ProtocolError);
  CHECK_THROWS_AS(decode_probe_challenge(encode_link_hello(LinkHello{nonce}), "p"), ProtocolError);
  CHECK_THROWS_AS(decode_link_count(R"({"type":"link_count","version":1,"bytes":-1})", "p"), ProtocolError);
  CHECK_THROWS_AS(decode_link_count(R"({"type":"link_count","version":1,"bytes":2.5})", "p"), ProtocolError);
  // The MAC inputs differ by purpose, so no answer of one exchange passes for another's.
  CHECK(link_listener_mac_input(nonce, 1) != probe_mac_input(nonce, 1));
  CHECK(link_sender_mac_input(nonce) != link_listener_mac_input(nonce, 1));

  const LinkTestRequestMsg req{{{1, "eth1", "10.9.0.2", 4000}}, 4 << 20, 250, 2000};
  const auto back = std::get<LinkTestRequestMsg>(decode_control(encode_control(req), "p"));
  CHECK(back.targets.size() == 1);
  CHECK(back.targets[0].address == "10.9.0.2");
  CHECK(back.targets[0].port == 4000);
  CHECK(back.max_bytes == 4 << 20);
  CHECK(back.max_ms == 250);
  CHECK(back.timeout_ms == 2000);
  const LinkTestResultMsg res{1, "10.9.0.2", 4 << 20, 3500, ""};
  const auto r = std::get<LinkTestResultMsg>(decode_control(encode_control(res), "p"));
  CHECK(r.host == 1);
  CHECK(r.bytes == 4 << 20);
  CHECK(r.micros == 3500);
  CHECK(r.error.empty());
  CHECK_THROWS_AS(decode_control(R"({"type":"link_test_result","host":1,"address":"a","bytes":1,"micros":1})", "p"),
                  ProtocolError);
}

TEST_CASE("link test over loopback: a figure from the right host, errors from the others, all bounded", "[link][probe]") {
  asio::io_context io;
  const JobSecret secret = JobSecret::generate();
  ProbeListener peer(io), stranger(io);
  peer.identify(secret, 1, "b");
  stranger.identify(JobSecret::generate(), 2, "c");  // another job's secret
  asio::ip::tcp::acceptor mute(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  std::vector<asio::ip::tcp::socket> held;
  mute.async_accept([&](boost::system::error_code ec, asio::ip::tcp::socket s) {
    if (!ec) held.push_back(std::move(s));
  });
  const int mute_port = mute.local_endpoint().port();

  LinkTester tester(io, secret);
  std::map<int, LinkTestResultMsg> results;
  const LinkTestRequestMsg req{{{1, "lo", "127.0.0.1", peer.port()},
                                {3, "lo", "127.0.0.1", peer.port()},  // host 1 answers for host 3
                                {2, "lo", "127.0.0.1", stranger.port()},
                                {4, "lo", "127.0.0.1", mute_port}},
                               4 << 20, 250, 1000};
  const auto started = std::chrono::steady_clock::now();
  tester.test(req, [&](LinkTestResultMsg r) { results[r.host] = std::move(r); });
  while (results.size() < 4 && std::chrono::steady_clock::now() - started < 5s) io.run_one_for(100ms);
  REQUIRE(results.size() == 4);
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  CHECK(results[1].error.empty());
  CHECK(results[1].bytes == 4 << 20);
  CHECK(results[1].micros > 0);
  CHECK(results[3].error.find("another host") != std::string::npos);
  CHECK(results[2].error.find("HMAC") != std::string::npos);
  CHECK(results[4].error.find("no answer within") != std::string::npos);
  CHECK(peer.waiting() == 0);  // every link session closed
}

TEST_CASE("link test: a sender without the job's secret gets no count, and its bytes are not taken", "[link][probe]") {
  asio::io_context io;
  const JobSecret secret = JobSecret::generate();
  ProbeListener peer(io);
  peer.identify(secret, 1, "b");
  LinkTester outsider(io, JobSecret::generate());
  std::optional<LinkTestResultMsg> result;
  outsider.test(LinkTestRequestMsg{{{1, "lo", "127.0.0.1", peer.port()}}, 1 << 20, 250, 1000},
                [&](LinkTestResultMsg r) { result = std::move(r); });
  const auto started = std::chrono::steady_clock::now();
  while (!result && std::chrono::steady_clock::now() - started < 5s) io.run_one_for(100ms);
  REQUIRE(result);
  // Its check of the listener's MAC fails first: it never proves anything, nor sends.
  CHECK(result->bytes == 0);
  CHECK(!result->error.empty());
}

TEST_CASE("link test: a forged start is closed without a count, and the listener's bounds hold", "[link][probe]") {
  asio::io_context io;
  const JobSecret secret = JobSecret::generate();
  ProbeListener peer(io);
  peer.identify(secret, 1, "b");
  const auto port = peer.port();
  std::string got;  // what the forger read after its start
  bool challenged = false;
  std::atomic<bool> forger_done{false};
  std::thread forger([&] {
    try {
      asio::io_context own;
      asio::ip::tcp::socket s(own);
      s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
      asio::write(s, asio::buffer(encode_frame(FrameType::kControl, encode_link_hello(LinkHello{std::string(kProbeNonceSize, 'x')}))));
      FrameDecoder d("listener");
      std::array<char, 1024> buf{};
      std::optional<Frame> f;
      while (!f) {
        const std::size_t n = s.read_some(asio::buffer(buf));
        d.feed(std::string_view(buf.data(), n));
        f = d.next();
      }
      challenged = decode_link_challenge(f->payload, "listener").host == 1;
      // A MAC of another secret, then bytes and the end of the stream.
      const std::string start = encode_frame(
          FrameType::kControl, encode_link_start(LinkStart{JobSecret::generate().mac(link_sender_mac_input("x"))}));
      boost::system::error_code ec;
      asio::write(s, asio::buffer(start + std::string(4096, 'z')), ec);
      s.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
      for (std::size_t n; (n = s.read_some(asio::buffer(buf), ec)) > 0 && !ec;) got.append(buf.data(), n);
    } catch (const std::exception& e) {
      got = std::string("the forger failed: ") + e.what();
    }
    forger_done = true;
  });
  // The listener's gate closes anything within 2 s: the forger ends by then whatever happens.
  const auto started = std::chrono::steady_clock::now();
  while (!forger_done && std::chrono::steady_clock::now() - started < 5s) io.run_one_for(50ms);
  forger.join();
  CHECK(std::chrono::steady_clock::now() - started < 1s);  // closed at the bad MAC, not at the deadline
  CHECK(challenged);
  CHECK(got.empty());  // closed: no LinkCount for a sender without the secret
  CHECK(peer.waiting() == 0);
}

// A rank's TCP connections through sock_diag (agent/rank_sockets.hpp): a loopback connection of the
// test process itself, a process that has exited, and one that holds no socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <unordered_set>
#include <thread>
#include <vector>

#include "agent/rank_sockets.hpp"
#include "common/unique_fd.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;

namespace {

// Both ends of a TCP connection on 127.0.0.1, in this process.
struct LoopbackPair {
  UniqueFd client, server;
  std::uint16_t server_port = 0;
};

// `receive_buffer` > 0: the server's SO_RCVBUF, set on the listener so the window it advertises is small.
// `family`: AF_INET (127.0.0.1) or AF_INET6 (::1).
LoopbackPair loopback_pair(int receive_buffer = 0, int family = AF_INET) {
  UniqueFd listener(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(listener);
  if (receive_buffer > 0)
    REQUIRE(::setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer) == 0);
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(addr);
    in6.sin6_family = AF_INET6;
    in6.sin6_addr = in6addr_loopback;
    len = sizeof in6;
  } else {
    auto& in = reinterpret_cast<sockaddr_in&>(addr);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof in;
  }
  REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0);
  REQUIRE(::listen(listener.get(), 1) == 0);
  REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  LoopbackPair pair;
  pair.server_port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(addr).sin6_port
                                              : reinterpret_cast<sockaddr_in&>(addr).sin_port);
  pair.client = UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(pair.client);
  REQUIRE(::connect(pair.client.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0);
  pair.server = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(pair.server);
  return pair;
}

// Sends `bytes` from client to server, reading them on the other side as they come (one thread).
void pump(LoopbackPair& pair, std::size_t bytes) {
  std::vector<char> chunk(256 * 1024, 'x');
  std::size_t sent = 0, received = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (received < bytes) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    pollfd fds[2] = {{pair.client.get(), static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                     {pair.server.get(), POLLIN, 0}};
    REQUIRE(::poll(fds, 2, 1000) >= 0);
    if (fds[0].revents & POLLOUT) {
      const ssize_t n = ::send(pair.client.get(), chunk.data(), std::min(chunk.size(), bytes - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    if (fds[1].revents & POLLIN) {
      const ssize_t n = ::recv(pair.server.get(), chunk.data(), chunk.size(), MSG_DONTWAIT);
      REQUIRE(n != 0);
      if (n > 0) received += static_cast<std::size_t>(n);
    }
  }
}

const TcpConnection* with_peer(const RankSocketsSample& s, const std::string& peer) {
  const auto it = std::find_if(s.details.begin(), s.details.end(), [&](const TcpConnection& c) { return c.peer == peer; });
  return it == s.details.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("rank sockets: a loopback connection of this process, its bytes, rate and peer") {
  LoopbackPair pair = loopback_pair();
  hvrun::TcpTable table;
  RankSockets sockets(::getpid());
  const std::string server = "127.0.0.1:" + std::to_string(pair.server_port);

  const RankSocketsSample before = sockets.sample(table);
  const TcpConnection* client = with_peer(before, server);
  REQUIRE(client != nullptr);
  CHECK(before.connections >= 2);  // both ends are this process's

  constexpr std::size_t kBytes = 8 << 20;
  pump(pair, kBytes);
  std::this_thread::sleep_for(20ms);  // the last acknowledgements
  const RankSocketsSample after = sockets.sample(table);
  client = with_peer(after, server);
  REQUIRE(client != nullptr);
  CHECK(client->bytes_acked >= kBytes);
  CHECK(client->delivery_rate > 0);
  CHECK(client->rtt_us > 0);
  CHECK(after.bytes_sent >= kBytes);       // the client's bytes, acknowledged in this window
  CHECK(after.bytes_received >= kBytes);   // the same bytes, at the server's end
  CHECK(after.sending >= 1);
  CHECK(after.lowest_delivery_rate > 0);
  CHECK(after.median_delivery_rate >= after.lowest_delivery_rate);
  CHECK_FALSE(after.slowest_peer.empty());
  CHECK(after.window > 0us);
  if (client->busy_time_us) {
    // The kernel counts these times in jiffies (1 to 4 ms): a loopback burst may count none.
    REQUIRE(after.busy_share);
    CHECK(*after.busy_share >= 0);
    CHECK(*after.busy_share <= 1);
    CHECK(*after.rwnd_limited_share <= *after.busy_share + 1e-9);
  } else {
    WARN("this kernel's tcp_info has no busy/rwnd/sndbuf times (before Linux 4.10)");
  }

  // Nothing moved since: no bytes in this window, nobody sending.
  const RankSocketsSample idle = sockets.sample(table);
  CHECK(idle.bytes_sent == 0);
  CHECK(idle.sending == 0);
  CHECK(idle.slowest_peer.empty());
  CHECK_FALSE(idle.busy_share);
  REQUIRE(with_peer(idle, server) != nullptr);
}

TEST_CASE("rank sockets: an IPv6 connection is found by the AF_INET6 dump, its peer in brackets") {
  LoopbackPair pair = loopback_pair(0, AF_INET6);
  hvrun::TcpTable table;
  RankSockets sockets(::getpid());
  (void)sockets.sample(table);
  pump(pair, 1 << 20);
  std::this_thread::sleep_for(20ms);
  const RankSocketsSample s = sockets.sample(table);
  const TcpConnection* client = with_peer(s, "[::1]:" + std::to_string(pair.server_port));
  REQUIRE(client != nullptr);
  CHECK(client->local.starts_with("[::1]:"));
  CHECK(s.bytes_sent >= (1u << 20));
}

TEST_CASE("rank sockets: of two links, the one whose receiver reads slowly is the slowest, held by its window") {
  LoopbackPair fast = loopback_pair();
  LoopbackPair slow = loopback_pair(16 * 1024);
  const std::string slow_server = "127.0.0.1:" + std::to_string(slow.server_port);
  hvrun::TcpTable table;
  RankSockets sockets(::getpid());
  (void)sockets.sample(table);

  // For 600 ms both clients write as fast as they can; the fast server reads all it gets, the slow one
  // 16 KiB every 20 ms.
  std::vector<char> chunk(256 * 1024, 'x');
  const auto start = std::chrono::steady_clock::now();
  auto next_slow_read = start;
  while (std::chrono::steady_clock::now() - start < 600ms) {
    pollfd fds[3] = {{fast.client.get(), POLLOUT, 0}, {fast.server.get(), POLLIN, 0}, {slow.client.get(), POLLOUT, 0}};
    if (::poll(fds, 3, 5) < 0) FAIL("poll: " << std::strerror(errno));
    if (fds[0].revents & POLLOUT) (void)::send(fast.client.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (fds[1].revents & POLLIN) (void)::recv(fast.server.get(), chunk.data(), chunk.size(), MSG_DONTWAIT);
    if (fds[2].revents & POLLOUT) (void)::send(slow.client.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (std::chrono::steady_clock::now() >= next_slow_read) {
      (void)::recv(slow.server.get(), chunk.data(), 16 * 1024, MSG_DONTWAIT);
      next_slow_read += 20ms;
    }
  }
  const RankSocketsSample s = sockets.sample(table);
  CHECK(s.sending >= 2);
  CHECK(s.slowest_peer == slow_server);
  const TcpConnection* held = with_peer(s, slow_server);
  const TcpConnection* free_running = with_peer(s, "127.0.0.1:" + std::to_string(fast.server_port));
  REQUIRE(held != nullptr);
  REQUIRE(free_running != nullptr);
  CHECK(s.lowest_delivery_rate == held->delivery_rate);
  CHECK(held->delivery_rate * 10 < free_running->delivery_rate);
  if (!held->rwnd_limited_us) {
    WARN("this kernel's tcp_info has no rwnd/sndbuf-limited times (before Linux 4.10)");
    return;
  }
  // Held back by the peer's window, or by its own send buffer filling behind it (the kernel counts the
  // stronger of the two at a time).
  CHECK(*held->rwnd_limited_us + *held->sndbuf_limited_us > 0);
  REQUIRE(s.rwnd_limited_share);
  CHECK(*s.rwnd_limited_share + *s.sndbuf_limited_share > 0);
}

TEST_CASE("rank sockets: a process that has exited gives an empty sample, not an error") {
  test::ChildProcess child({"/bin/true"});
  REQUIRE(child.wait(10s).exit_code == 0);  // reaped: its pid is gone
  hvrun::TcpTable table;
  RankSockets sockets(child.pid());
  const RankSocketsSample s = sockets.sample(table);
  CHECK(s.connections == 0);
  CHECK(s.details.empty());
  CHECK(s.bytes_sent == 0);
}

TEST_CASE("rank sockets: a process without sockets has no connections") {
  test::ChildProcess child({"/bin/sleep", "30"});
  hvrun::TcpTable table;
  RankSockets sockets(child.pid());
  const RankSocketsSample s = sockets.sample(table);
  CHECK(s.connections == 0);
  CHECK(s.details.empty());
  CHECK(s.sending == 0);
}

TEST_CASE("rank sockets: the cost of one sample of a process with 10 connections") {
  std::vector<LoopbackPair> pairs;
  for (int i = 0; i < 5; ++i) pairs.push_back(loopback_pair());  // 10 connections, both ends here
  hvrun::TcpTable table;
  RankSockets sockets(::getpid());
  (void)sockets.sample(table);
  constexpr int kRounds = 50;
  std::size_t found = 0;
  auto fastest = std::chrono::microseconds::max();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    found = sockets.sample(table).connections;
    fastest = std::min(fastest, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0));
  }
  const auto each = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start) / kRounds;
  CHECK(found >= 10);
  WARN("one sample of " << found << " connections: " << each.count() << " us on average, " << fastest.count()
                        << " us at best, " << kRounds << " samples");
  CHECK(each < 50ms);  // a bound for a loaded CI machine; the header states what was measured
}

TEST_CASE("rank sockets: one table read serves several processes, each finding only its own connections") {
  LoopbackPair pair = loopback_pair();
  test::ChildProcess child({"/usr/bin/python3", "-c",
                            "import socket, time\n"
                            "s = socket.create_server(('127.0.0.1', 0))\n"
                            "c = socket.create_connection(s.getsockname())\n"
                            "a, _ = s.accept()\n"
                            "print('up', s.getsockname()[1], flush=True)\n"
                            "time.sleep(30)\n"});
  REQUIRE(child.wait_for_stdout("up", 1, 20s));
  RankSockets mine(::getpid()), theirs(child.pid());
  const auto my_inodes = mine.inodes(), their_inodes = theirs.inodes();
  REQUIRE(my_inodes);
  REQUIRE(their_inodes);
  std::unordered_set<std::uint64_t> all = *my_inodes;
  all.insert(their_inodes->begin(), their_inodes->end());
  hvrun::TcpTable table;
  const TcpTable::Connections read = table.read(all);
  const RankSocketsSample m = mine.sample(my_inodes, read), t = theirs.sample(their_inodes, read);
  const std::string server = "127.0.0.1:" + std::to_string(pair.server_port);
  CHECK(with_peer(m, server) != nullptr);
  CHECK(with_peer(t, server) == nullptr);
  CHECK(t.connections == 2);  // the child's two ends
  for (const TcpConnection& c : t.details) CHECK(my_inodes->count(c.inode) == 0);
}

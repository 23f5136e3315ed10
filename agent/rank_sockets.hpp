#pragma once
// A rank's TCP connections as the kernel measures them (issue 40: name the slow link): the sockets the
// process holds (/proc/PID/fd, "socket:[INODE]") matched by inode against one NETLINK_SOCK_DIAG dump per
// family (AF_INET, AF_INET6; TCP, ESTABLISHED, with INET_DIAG_INFO's struct tcp_info). Nothing is asked
// of the rank itself and nothing needs root: the agent reads its own children. The dumps see the
// sockets of the agent's network namespace, which its ranks share.
//
// Units: bytes, bytes per second, microseconds and segments, as tcp_info gives them; shares are
// fractions of the window (0..1). Deltas run from the previous sample() of the same object.
//
// Cost, measured ("rank sockets: the cost of one sample ..." in tests/test_rank_sockets.cpp, 50 samples
// of a process holding 10 TCP connections, kernel 6.18, 2 cores under a load of 9): 2.2 ms at best,
// 5 ms on average. Nearly all of it is the kernel's: each of the two dumps walks the whole established
// hash table (strace: 1.1 ms per dump request, here tcp_ehash_entries = 262144, sized from the host's
// memory), so the cost grows with that table, hardly with the process's fds or connections. A host-wide
// dump shared by the ranks of one window would pay it once per host instead of once per rank.
//
// Blocking: each receive waits at most kReceiveTimeout (SO_RCVTIMEO), the whole sample at most
// kSampleDeadline; past either, TimeoutError. The netlink socket stays open between samples.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.hpp"

namespace hvrun {

// One established TCP connection of the process; totals since the connection opened.
struct TcpConnection {
  std::uint64_t inode = 0;
  std::string local;                   // "127.0.0.1:41234", "[::1]:29500"
  std::string peer;                    // the remote address:port, same form
  std::uint64_t bytes_acked = 0;       // bytes this side sent that the peer acknowledged
  std::uint64_t bytes_received = 0;    // bytes received
  std::uint64_t delivery_rate = 0;     // bytes/s, the kernel's latest estimate of the sending rate
  bool delivery_rate_app_limited = false;  // that estimate was taken while the program had nothing to send
  std::uint32_t total_retrans = 0;     // segments retransmitted
  std::uint32_t rtt_us = 0;            // smoothed round-trip time, microseconds
  std::uint32_t notsent_bytes = 0;     // bytes written by the program, not yet sent
  std::uint32_t unacked = 0;           // segments in flight
  // Microseconds spent with data to send (busy), and of those stalled by the peer's receive window
  // or by this side's send buffer; absent where the kernel's tcp_info is too short to hold them (before
  // Linux 4.10). The kernel counts them in jiffies (1 to 4 ms): bursts shorter than that may count none.
  std::optional<std::uint64_t> busy_time_us, rwnd_limited_us, sndbuf_limited_us;
};

// What a process's TCP connections did in one window (from the previous sample to this one).
struct RankSocketsSample {
  std::chrono::microseconds window{0};  // since the previous sample (the first: since construction)
  std::size_t connections = 0;         // established TCP connections now
  std::uint64_t bytes_sent = 0;        // bytes acknowledged by the peers in the window
  std::uint64_t bytes_received = 0;
  std::uint64_t retransmits = 0;       // segments retransmitted in the window
  // `sending`: the connections that sent data in the window. Among those that sent at least
  // RankSockets::kBulkBytes (delivery rate is a sender's measure): the lowest and the median delivery rate
  // (bytes/s), and the slowest connection's peer; 0 and "" when none did. An app-limited estimate says the program, not the link, set that pace.
  std::size_t sending = 0;
  std::uint64_t lowest_delivery_rate = 0;
  std::uint64_t median_delivery_rate = 0;
  std::string slowest_peer;
  bool slowest_app_limited = false;
  std::uint64_t highest_delivery_rate = 0;  // and the fastest one's, with its peer
  std::string fastest_peer;
  // Averaged over the sending connections: the share of the window each spent with data to send
  // (busy), stalled by its peer's receive window (the peer reads too slowly) and by its own send
  // buffer. Absent when no connection sent or the kernel does not report these times.
  std::optional<double> busy_share, rwnd_limited_share, sndbuf_limited_share;
  std::vector<TcpConnection> details;  // every connection, for a debug log
};

// One per rank; keeps the previous sample's totals to give deltas. Not thread-safe.
class RankSockets {
 public:
  static constexpr std::chrono::milliseconds kReceiveTimeout{1000};
  static constexpr std::chrono::milliseconds kSampleDeadline{2000};
  // The rates come from connections that sent at least this much in the window: one that sent a few
  // messages gives its last burst's rate, which says little of the link (a store's or a rendezvous's
  // connection beside the collectives' bulk ones).
  static constexpr std::uint64_t kBulkBytes = 256 * 1024;

  // Opens the NETLINK_SOCK_DIAG socket; throws SystemError when the kernel refuses one.
  explicit RankSockets(pid_t pid);

  // The process's connections now and what they did since the previous call. A process that has
  // exited (or exits meanwhile) gives an empty sample, not an error. Throws SystemError for a failed
  // call, TimeoutError when the kernel does not answer in time, ProtocolError for a malformed answer.
  RankSocketsSample sample();

  pid_t pid() const { return pid_; }

 private:
  struct Totals {
    std::uint64_t acked = 0, received = 0, retrans = 0;
    std::optional<std::uint64_t> busy, rwnd, sndbuf;
  };

  pid_t pid_;
  UniqueFd netlink_;
  std::uint32_t sequence_ = 0;  // of the dump requests, so a late answer to an earlier one is told apart
  std::chrono::steady_clock::time_point previous_time_;
  std::unordered_map<std::uint64_t, Totals> previous_;  // by socket inode
};

}  // namespace hvrun

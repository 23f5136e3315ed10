#pragma once
// A rank's TCP connections (issue 40: name the slow link): the sockets the process holds (/proc/PID/fd,
// "socket:[INODE]") found in the host's table of connections (TcpTable, agent/tcp_table.hpp), and what they
// did since the previous sample. Nothing is asked of the rank itself and nothing needs root.
//
// Units: bytes, bytes per second, microseconds and segments, as tcp_info gives them; shares are
// fractions of the window (0..1). Deltas run from the previous sample() of the same object.
//
// Cost, measured ("rank sockets: the cost of one sample ..." in tests/test_rank_sockets.cpp, 50 samples
// of a process holding 10 TCP connections, kernel 6.18, 2 cores under a load of 9): 2.2 ms at best,
// 5 ms on average, nearly all of it the table's dumps: RankObserver reads one table a window for all the
// ranks of its host.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/tcp_table.hpp"

namespace hvrun {

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
  // The rates come from connections that sent at least this much in the window: one that sent a few
  // messages gives its last burst's rate, which says little of the link (a store's or a rendezvous's
  // connection beside the collectives' bulk ones).
  static constexpr std::uint64_t kBulkBytes = 256 * 1024;

  explicit RankSockets(pid_t pid);

  // The inodes of the sockets the process holds now; nullopt when it has exited (or exits meanwhile).
  // Throws SystemError for a failed read of /proc.
  std::optional<std::unordered_set<std::uint64_t>> inodes() const;
  // What the process's connections did since the previous call: `inodes` as inodes() gave them, `table` a
  // TcpTable::read of a set that holds them. A process gone gives an empty sample.
  RankSocketsSample sample(const std::optional<std::unordered_set<std::uint64_t>>& inodes,
                           const TcpTable::Connections& table);
  // The same, with a table read for this process alone; throws as inodes() and TcpTable::read.
  RankSocketsSample sample(TcpTable& table);

  pid_t pid() const { return pid_; }

 private:
  struct Totals {
    std::uint64_t acked = 0, received = 0, retrans = 0;
    std::optional<std::uint64_t> busy, rwnd, sndbuf;
  };

  pid_t pid_;
  std::chrono::steady_clock::time_point previous_time_;
  std::unordered_map<std::uint64_t, Totals> previous_;  // by socket inode
};

}  // namespace hvrun

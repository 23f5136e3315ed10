#pragma once
// The host's established TCP connections as the kernel measures them (issue 40: name the slow link): one
// NETLINK_SOCK_DIAG dump per family (AF_INET, AF_INET6; TCP, ESTABLISHED, with INET_DIAG_INFO's struct
// tcp_info), kept for the sockets asked for (by inode). Nothing is asked of the processes and nothing
// needs root. The dumps see the sockets of the caller's network namespace, which an agent's ranks share.
//
// Cost: nearly all of it is the kernel's, each dump walking the whole established hash table (1.1 ms a
// dump request measured, with tcp_ehash_entries = 262144, sized from the host's memory), hardly growing
// with the connections asked for; so the agent reads one table a window for all its ranks (RankObserver).
//
// Blocking: each receive waits at most kReceiveTimeout (SO_RCVTIMEO), a read at most kReadDeadline; past
// either, TimeoutError. The netlink socket stays open between reads.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/unique_fd.hpp"

namespace hvrun {

// One established TCP connection; totals since the connection opened.
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

class TcpTable {
 public:
  static constexpr std::chrono::milliseconds kReceiveTimeout{1000};
  static constexpr std::chrono::milliseconds kReadDeadline{2000};
  using Connections = std::unordered_map<std::uint64_t, TcpConnection>;  // by socket inode

  // Opens the NETLINK_SOCK_DIAG socket; throws SystemError when the kernel refuses one.
  TcpTable();

  // The established TCP connections whose socket inode is in `inodes`. Throws SystemError for a failed
  // call, TimeoutError when the kernel does not answer in time, ProtocolError for a malformed answer.
  Connections read(const std::unordered_set<std::uint64_t>& inodes);

 private:
  UniqueFd netlink_;
  std::uint32_t sequence_ = 0;  // of the dump requests, so a late answer to an earlier one is told apart
};

}  // namespace hvrun

#include "agent/rank_sockets.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_set>

#include "common/error.hpp"

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

bool process_gone(int err) { return err == ENOENT || err == ESRCH; }

// The inodes of the sockets `pid` holds; nullopt when the process is gone (or goes while it is read).
std::optional<std::unordered_set<std::uint64_t>> socket_inodes(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::unique_ptr<DIR, DirCloser> listing(::opendir(dir.c_str()));
  if (!listing) {
    if (process_gone(errno)) return std::nullopt;
    throw_errno("opendir", dir);
  }
  constexpr std::string_view kPrefix = "socket:[";
  std::unordered_set<std::uint64_t> inodes;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(listing.get());
    if (entry == nullptr) {
      if (errno == 0) break;
      if (process_gone(errno)) return std::nullopt;
      throw_errno("readdir", dir);
    }
    if (entry->d_name[0] == '.') continue;
    char target[64];  // "socket:[N]" fits; longer targets (paths) are cut, and are not sockets
    const ssize_t n = ::readlinkat(::dirfd(listing.get()), entry->d_name, target, sizeof target);
    if (n < 0) {
      if (process_gone(errno)) continue;  // that fd closed meanwhile
      throw_errno("readlinkat", dir + "/" + entry->d_name);
    }
    const std::string_view text(target, static_cast<std::size_t>(n));
    if (!text.starts_with(kPrefix) || !text.ends_with(']')) continue;
    std::uint64_t inode = 0;
    const char* first = text.data() + kPrefix.size();
    const char* last = text.data() + text.size() - 1;
    if (std::from_chars(first, last, inode).ptr == last) inodes.insert(inode);
  }
  return inodes;
}

// A counter's growth since `before`; a counter lower than before is a new connection on a reused inode.
std::uint64_t growth(std::uint64_t now, std::uint64_t before) { return now >= before ? now - before : now; }

}  // namespace

RankSockets::RankSockets(pid_t pid) : pid_(pid), previous_time_(Clock::now()) {}

std::optional<std::unordered_set<std::uint64_t>> RankSockets::inodes() const { return socket_inodes(pid_); }

RankSocketsSample RankSockets::sample(TcpTable& table) {
  const auto held = inodes();
  return sample(held, held ? table.read(*held) : TcpTable::Connections{});
}

RankSocketsSample RankSockets::sample(const std::optional<std::unordered_set<std::uint64_t>>& inodes,
                                      const TcpTable::Connections& table) {
  const auto now = Clock::now();
  RankSocketsSample out;
  out.window = std::chrono::duration_cast<std::chrono::microseconds>(now - previous_time_);
  previous_time_ = now;
  if (!inodes || inodes->empty()) {
    previous_.clear();
    return out;
  }
  for (const std::uint64_t inode : *inodes)
    if (const auto it = table.find(inode); it != table.end()) out.details.push_back(it->second);
  out.connections = out.details.size();

  struct Sender {
    std::uint64_t rate;
    bool app_limited;
    const std::string* peer;
  };
  std::vector<Sender> senders;
  const double window_us = static_cast<double>(out.window.count());
  double busy = 0, rwnd = 0, sndbuf = 0;
  std::size_t timed = 0;
  const auto share = [&](std::uint64_t us) { return window_us > 0 ? std::min(1.0, static_cast<double>(us) / window_us) : 0.0; };
  std::unordered_map<std::uint64_t, Totals> totals;
  for (const TcpConnection& c : out.details) {
    const Totals now_totals{c.bytes_acked, c.bytes_received, c.total_retrans, c.busy_time_us, c.rwnd_limited_us,
                            c.sndbuf_limited_us};
    const auto it = previous_.find(c.inode);
    const Totals before = it != previous_.end() ? it->second : Totals{};
    const std::uint64_t sent = growth(now_totals.acked, before.acked);
    out.bytes_sent += sent;
    out.bytes_received += growth(now_totals.received, before.received);
    out.retransmits += growth(now_totals.retrans, before.retrans);
    if (sent > 0) {
      ++out.sending;
      if (sent >= kBulkBytes) senders.push_back({c.delivery_rate, c.delivery_rate_app_limited, &c.peer});
      if (now_totals.busy && now_totals.rwnd && now_totals.sndbuf) {
        busy += share(growth(*now_totals.busy, before.busy.value_or(0)));
        rwnd += share(growth(*now_totals.rwnd, before.rwnd.value_or(0)));
        sndbuf += share(growth(*now_totals.sndbuf, before.sndbuf.value_or(0)));
        ++timed;
      }
    }
    totals.emplace(c.inode, now_totals);
  }
  previous_ = std::move(totals);

  if (!senders.empty()) {
    std::sort(senders.begin(), senders.end(), [](const Sender& a, const Sender& b) { return a.rate < b.rate; });
    out.lowest_delivery_rate = senders.front().rate;
    out.slowest_peer = *senders.front().peer;
    out.slowest_app_limited = senders.front().app_limited;
    out.highest_delivery_rate = senders.back().rate;
    out.fastest_peer = *senders.back().peer;
    const std::size_t mid = senders.size() / 2;
    out.median_delivery_rate =
        senders.size() % 2 == 1 ? senders[mid].rate : (senders[mid - 1].rate + senders[mid].rate) / 2;
  }
  if (timed > 0 && window_us > 0) {
    out.busy_share = busy / static_cast<double>(timed);
    out.rwnd_limited_share = rwnd / static_cast<double>(timed);
    out.sndbuf_limited_share = sndbuf / static_cast<double>(timed);
  }
  return out;
}

}  // namespace hvrun

#include "common/stranger_gate.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <limits>

#include "common/duration_text.hpp"

namespace hvrun {

namespace asio = boost::asio;

StrangerGate::Pass::Pass(Pass&& other) noexcept : gate_(std::move(other.gate_)), id_(std::exchange(other.id_, 0)) {}

StrangerGate::Pass& StrangerGate::Pass::operator=(Pass&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = std::move(other.gate_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

StrangerGate::Pass::~Pass() { release(); }

void StrangerGate::Pass::release() {
  if (id_ == 0) return;
  if (auto gate = gate_.lock()) gate->release(id_);
  id_ = 0;
}

StrangerGate::StrangerGate(asio::io_context& io, std::string where, LogSubsys subsys, StrangerLimits limits)
    : io_(io), where_(std::move(where)), limits_(limits), log_(std::make_shared<ThrottledLog>(io, subsys)) {
  const std::size_t budget = descriptor_budget();
  limits_.total = std::max<std::size_t>(1, std::min(limits_.total, budget));
  limits_.per_peer = std::max<std::size_t>(1, std::min(limits_.per_peer, limits_.total));
}

std::size_t StrangerGate::descriptor_budget() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(limit.rlim_cur / 4);
}

std::string StrangerGate::address_text(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).to_string();
  return a.to_string();
}

StrangerGate::Pass StrangerGate::admit(const asio::ip::address& peer_address, Drop drop_it) {
  const std::string peer = address_text(peer_address);
  if (auto it = by_peer_.find(peer); it != by_peer_.end() && it->second.size() >= limits_.per_peer)
    drop(*it->second.begin(), "over the limit of unauthenticated connections from one address",
         "over the limit of " + count_text(limits_.per_peer) +
             " unauthenticated connections from one address; the oldest is closed for each new one");
  if (entries_.size() >= limits_.total)
    drop(entries_.begin()->first, "over the limit of unauthenticated connections",
         "over the limit of " + count_text(limits_.total) +
             " unauthenticated connections from all addresses; the oldest is closed for each new one");
  const std::uint64_t id = next_id_++;
  auto timer = std::make_unique<asio::steady_timer>(io_, limits_.deadline);
  timer->async_wait([weak = weak_from_this(), id](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock())
      self->drop(id, "no handshake in time",
                 "no complete handshake within " + seconds_text(self->limits_.deadline));
  });
  entries_.emplace(id, Entry{peer, std::move(drop_it), std::move(timer)});
  by_peer_[peer].insert(id);
  return Pass(weak_from_this(), id);
}

std::size_t StrangerGate::waiting_from(const asio::ip::address& peer) const {
  const auto it = by_peer_.find(address_text(peer));
  return it == by_peer_.end() ? 0 : it->second.size();
}

void StrangerGate::note_refusal(const std::string& peer, const std::string& why) {
  log_->note(peer + "\n" + why, [where = where_, peer, why](std::uint64_t n) {
    return (n == 1 ? "refused a connection" : "refused " + count_text(n) + " connections") + " from " + peer +
           " to " + where + " (" + why + "); if " + peer +
           " is not a host of this job, block it from this port with a firewall";
  });
}

void StrangerGate::release(std::uint64_t id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  auto& ids = by_peer_[it->second.peer];
  ids.erase(id);
  if (ids.empty()) by_peer_.erase(it->second.peer);
  entries_.erase(it);  // cancels the timer
}

void StrangerGate::drop(std::uint64_t id, const std::string& why, const std::string& logged_why) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Drop drop_it = std::move(it->second.drop);
  const std::string peer = it->second.peer;
  release(id);  // first: drop_it's own release then finds nothing
  note_refusal(peer, logged_why);
  if (drop_it) drop_it(why);
}

}  // namespace hvrun

#pragma once
// What strangers on the network may hold of a listener: its connections that have not yet proven they
// belong to the job (the store's HMAC, a knock's token; a probe's answer is the whole exchange). Each
// such connection takes a pass at accept; the pass is given back when it authenticates or closes.
// Bounds, per source address and in all: a new connection over a bound is admitted and the oldest
// unauthenticated one (of that address, or of all) is closed for it. A flood therefore holds at most
// the bound, and a rank of the job, which authenticates within one round trip, is crowded out only by
// a flood that opens more than the bound's worth of connections from its own address during that
// round trip. A pass not given back within the deadline closes its connection too. Every connection
// so closed is counted in a ThrottledLog, by address: a few lines, each with its count.
// Authenticated connections are not counted here. Single-threaded (the io_context's thread); make it
// with std::make_shared.
#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "common/log.hpp"
#include "common/throttled_log.hpp"

namespace hvrun {

struct StrangerLimits {
  std::size_t per_peer = 64;  // unauthenticated connections from one address at once
  std::size_t total = 256;    // from all addresses at once
  std::chrono::milliseconds deadline{5000};  // to authenticate
};

class StrangerGate : public std::enable_shared_from_this<StrangerGate> {
 public:
  // Closes a connection the gate gives up on; `why` for a debug line. Called on the io thread, never
  // from inside admit()'s caller's own connection.
  using Drop = std::function<void(const std::string& why)>;

  // A connection's place among the unauthenticated ones; move-only. Destroying it or release() gives
  // the place back (the connection authenticated, or closed).
  class Pass {
   public:
    Pass() = default;
    Pass(Pass&& other) noexcept;
    Pass& operator=(Pass&& other) noexcept;
    ~Pass();
    void release();
    bool held() const { return id_ != 0; }

   private:
    friend class StrangerGate;
    Pass(std::weak_ptr<StrangerGate> gate, std::uint64_t id) : gate_(std::move(gate)), id_(id) {}
    std::weak_ptr<StrangerGate> gate_;
    std::uint64_t id_ = 0;
  };

  // `where` names the listener in log lines ("the store on host-3"). `limits` are clamped to the
  // descriptors this process may open (descriptor_budget()).
  StrangerGate(boost::asio::io_context& io, std::string where, LogSubsys subsys, StrangerLimits limits);
  StrangerGate(const StrangerGate&) = delete;
  StrangerGate& operator=(const StrangerGate&) = delete;

  // Admits a connection from `peer`; over a bound, first closes the oldest unauthenticated one (see
  // above). `drop` closes this connection should the gate give up on it later.
  Pass admit(const boost::asio::ip::address& peer, Drop drop);

  const StrangerLimits& limits() const { return limits_; }
  std::size_t waiting() const { return entries_.size(); }
  std::size_t waiting_from(const boost::asio::ip::address& peer) const;
  // Connections closed for a bound or the deadline, since the start.
  std::uint64_t dropped() const { return log_->total(); }
  // Counts one more refusal of `peer` for `why` in this gate's log (a listener's own reasons: a wrong
  // token, an address not allowed), with the same throttling.
  void note_refusal(const std::string& peer, const std::string& why);

  // A quarter of this process's soft RLIMIT_NOFILE (every listener of a process together stays well
  // under it); unlimited when it cannot be read.
  static std::size_t descriptor_budget();
  // The address as messages show it: an IPv4-mapped IPv6 address as IPv4.
  static std::string address_text(const boost::asio::ip::address& a);

 private:
  struct Entry {
    std::string peer;
    Drop drop;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  void release(std::uint64_t id);
  void drop(std::uint64_t id, const std::string& why, const std::string& logged_why);

  boost::asio::io_context& io_;
  std::string where_;
  StrangerLimits limits_;
  std::shared_ptr<ThrottledLog> log_;
  std::map<std::uint64_t, Entry> entries_;  // by id: the oldest first
  std::unordered_map<std::string, std::set<std::uint64_t>> by_peer_;
  std::uint64_t next_id_ = 1;
};

}  // namespace hvrun

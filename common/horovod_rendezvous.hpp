#pragma once
// Horovod's Gloo rendezvous, the server side: the HTTP key-value store that Horovod's ranks reach at
// http://HOROVOD_GLOO_RENDEZVOUS_ADDR:HOROVOD_GLOO_RENDEZVOUS_PORT/<scope>/<key> (client:
// horovod/common/gloo/http_store.cc). PUT stores the raw body under the request target, GET answers
// 200 with it or 404 while it is missing (the client polls), DELETE forgets it; every answer carries
// Content-Length. HTTP is Boost.Beast's; the server runs in an existing single-threaded io_context (the
// agent's), adds no thread, and its keys live exactly as long as the object (one per job).
//
// Horovod's client cannot authenticate, so this server is guarded by where it listens and whom it
// answers: one IPv4 address (the chosen NIC's: Horovod's client is IPv4 only), connections only from
// `allowed_peers` (the job's hosts' addresses; others are closed unanswered), and bounded memory: the
// request header, each value, the number of keys, their total size, the number of open connections, and
// how long a connection may take to send its request.
//
// Knocks (an elastic job's rendezvous, served by the launcher): a joining host's agent, given a one-time
// token over its SSH channel (KnockMsg), sends `PUT /hvrun/knock` with the token as the body. The
// request that carries a token expected (expect_knock) is answered 200, the token is spent, and its
// source address is allowed from then on: a host behind a NAT is admitted by the address its traffic
// really arrives from, and only by proving it holds the token. While a knock is expected, a
// connection from an address not allowed is read for that one request (header and body bounded to a
// few hundred bytes) and closed unanswered for anything else.
//
// Bounded for strangers (common/stranger_gate.hpp): connections that may only knock, at most 8 from
// one address and 64 in all, each for at most 2 s; over a bound the oldest is closed for the new one,
// so a flood cannot keep a joining host's knock out. An allowed peer's connection waiting for its next
// request is bounded the same way: 1,024 from one address (a host's ranks, all at once at a start) and
// max_connections in all, within request_timeout. Refused connections are logged a few times with a
// count, by address.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/horovod_pickle.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

struct HorovodRendezvousState;  // listener, map, connections; horovod_rendezvous.cpp

struct HorovodRendezvousLimits {
  std::size_t max_header = 8 * 1024;               // request line + headers (the target is the key)
  std::size_t max_value = 16u << 20;               // one PUT body
  std::size_t max_keys = 1u << 20;                 // keys held at once
  std::size_t max_total = std::size_t{1} << 30;    // sum of keys' and values' sizes held at once
  // Open at once; more are closed unanswered. Clamped to a quarter of the open files limit (which the
  // agent and hvrun raise to the hard limit at start): 4,096 takes 1,024 ranks on each of 4 hosts at once.
  std::size_t max_connections = 4096;
  std::chrono::milliseconds request_timeout{10000};  // to send a whole request, and to take the reply
};

// Horovod elastic's two requests (horovod/runner/elastic/rendezvous.py), answered by the elastic
// driver. Keys are "HOST:LOCAL_RANK" (the worker's HOROVOD_HOSTNAME and local rank); a malformed key
// is answered 400.
struct HorovodElasticHooks {
  // GET /rank_and_size/HOST:LOCAL_RANK, which a worker sends once per (re-)initialisation and which
  // Horovod's driver holds until the round ends. `answer` takes the body ("rank,size,local_rank,
  // local_size,cross_rank,cross_size"; "-1,..." for a removed slot) now or later, on the io thread; only
  // its first call counts, and a call after the connection closed does nothing.
  std::function<void(const std::string& host, int local_rank, std::function<void(std::string)> answer)> rank_and_size;
  // PUT /worker_addresses/HOST:LOCAL_RANK, decoded (decode_worker_addresses_put); the raw value is also
  // stored like any PUT. A value that does not decode is answered 400 and not stored.
  std::function<void(const std::string& host, int local_rank, HorovodWorkerAddresses addresses)> worker_addresses;
  // PUT /global/RANK (stored like any PUT): rank RANK has begun Gloo's global rendezvous of its world
  // (connectFullMesh publishes its address under its rank in scope "global"). May be empty.
  std::function<void(int rank)> global_rank_published;
};

struct HorovodRendezvousOptions {
  std::string address;                  // IPv4 address to listen on
  std::uint16_t port = 0;               // 0: a free port, see port()
  std::set<std::string> allowed_peers;  // IPv4 addresses whose connections are answered
  HorovodRendezvousLimits limits;
  std::optional<HorovodElasticHooks> elastic;  // set for an elastic job's rendezvous
};

class HorovodRendezvous {
 public:
  // Listens at once. Throws Error naming the address when it is not IPv4 or cannot be listened on, or
  // when allowed_peers is empty. Call every member from the thread that runs `io`.
  HorovodRendezvous(boost::asio::io_context& io, HorovodRendezvousOptions options);
  ~HorovodRendezvous();  // close()
  HorovodRendezvous(const HorovodRendezvous&) = delete;
  HorovodRendezvous& operator=(const HorovodRendezvous&) = delete;

  std::uint16_t port() const;
  // Also listens on `address` (IPv4), the same keys and rules: an elastic job's rendezvous, served by
  // the launcher, is reached at a different address of the launcher from each host. The port is
  // port() where that is free there, else another (returned). Throws Error as the constructor does.
  std::uint16_t listen_also(boost::asio::io_context& io, const std::string& address);

  // A fresh knock token: kKnockTokenSize lowercase hex characters of random bytes.
  static constexpr std::size_t kKnockTokenSize = 64;
  static std::string new_knock_token();
  // The first knock carrying `token` runs `knocked` with its source address (already allowed then), on
  // the io thread, and spends the token. Throws Error for a token of another size.
  void expect_knock(const std::string& token, std::function<void(const std::string& address)> knocked);
  // The knock will not come (its host was refused or lost); a later one with `token` is refused.
  void forget_knock(const std::string& token);
  // Forgets every key of every scope, as Horovod's server does on each new assignment (init), so that
  // no worker of the new world reads a value of the old one. Held rank_and_size requests stay held.
  void clear_keys();
  // Stops listening, closes every connection and forgets every key. Idempotent.
  void close();

  // For tests and diagnostics.
  std::size_t key_count() const;
  std::size_t connection_count() const;
  // Connections refused (peers not allowed, over the connection bound) or closed as strangers (over a
  // bound, past the deadline).
  std::size_t refused_count() const;

 private:
  std::shared_ptr<HorovodRendezvousState> state_;
};

}  // namespace hvrun

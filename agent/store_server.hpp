#pragma once
// The job's rendezvous store (the server side): a key-value map with blocking get/wait, an atomic
// counter (add), check and delete, served over TCP to the ranks of one job. It runs inside an existing
// single-threaded Boost.Asio io_context (the agent's), so it adds no thread and lives exactly as long
// as its owner keeps it. Protocol and limits: common/store_protocol.hpp.
//
// Guarantees: every connection proves it holds the job token before any operation (HMAC challenge,
// constant-time compare); garbage, oversized frames, a wrong token or silence past the authentication
// deadline close that connection only; connections not yet authenticated are bounded per source
// address and in all (StoreServerOptions), and the refusals logged a few times with a count; a waiting get or wait is woken by the set that completes it (no
// polling) and answered with the missing keys when its deadline passes; memory per connection is bounded
// by one message in each direction (store::kMaxMessage).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/store_protocol.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

struct StoreServerState;  // the listener, the map and the connections; store_server.cpp

struct StoreServerOptions {
  // A connection that has not authenticated by then is closed.
  std::chrono::milliseconds auth_timeout = store::kDefaultAuthTimeout;
  // Unauthenticated connections at once (common/stranger_gate.hpp: over a bound, the oldest is closed
  // for the new one), clamped to a quarter of the open files limit. Every rank of the job connects to
  // this store, all at once at a start or restart: 1,024 ranks on one host (the most a host runs) and
  // 4,096 in all are taken together without one being closed, however slowly they authenticate.
  std::size_t max_unauthenticated_per_peer = 1024;
  std::size_t max_unauthenticated = 4096;
};

class StoreServer {
 public:
  // Listens on bind_address:port at once (bind_address "" = every address, IPv6 and IPv4; port 0 = a
  // free port, see port()). Throws Error naming the address when it cannot listen, or when the token is
  // empty. `io` must be run by one thread; call every member from that thread (or before it runs).
  StoreServer(boost::asio::io_context& io, std::string token, const std::string& bind_address = "",
              std::uint16_t port = 0, StoreServerOptions options = {});
  ~StoreServer();  // close()
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  std::uint16_t port() const;
  // Stops listening and closes every connection; waiting clients see the connection close. Idempotent.
  void close();

  // For tests and diagnostics: open connections, and keys held.
  std::size_t connection_count() const;
  std::size_t key_count() const;
  std::size_t unauthenticated_count() const;
  // Connections closed unauthenticated (over a bound, past the deadline) or refused a wrong token.
  std::uint64_t refused_count() const;

 private:
  std::shared_ptr<StoreServerState> state_;
};

}  // namespace hvrun

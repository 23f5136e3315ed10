#pragma once
// Test support: a StoreServer on 127.0.0.1 served by its own io thread (as the agent serves it inside
// its io_context), with the client options and HVRUN_STORE_* variables that reach it.
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <utility>  // before Asio
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "agent/store_server.hpp"
#include "collectives/store_client.hpp"

namespace hvrun::test {

class ServedStore {
 public:
  explicit ServedStore(StoreServerOptions options = {});
  ~ServedStore();
  ServedStore(const ServedStore&) = delete;
  ServedStore& operator=(const ServedStore&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& token() const { return token_; }
  StoreClientOptions client_options(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // "HVRUN_STORE_ADDR=127.0.0.1", "HVRUN_STORE_PORT=…", "HVRUN_STORE_TOKEN=…".
  std::vector<std::string> env() const;

  // Runs f on the server's thread (StoreServer is single-threaded) and returns its result.
  template <typename F>
  auto on_io(F f) -> decltype(f(std::declval<StoreServer&>())) {
    std::packaged_task<decltype(f(std::declval<StoreServer&>()))()> task([&] { return f(*server_); });
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }

 private:
  boost::asio::io_context io_;
  std::string token_;
  std::unique_ptr<StoreServer> server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace hvrun::test

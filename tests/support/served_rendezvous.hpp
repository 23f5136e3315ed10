#pragma once
// Test support for Horovod's Gloo rendezvous server (common/horovod_rendezvous.hpp; test_horovod_rendezvous.cpp,
// test_horovod_rendezvous_elastic.cpp): the server on 127.0.0.1 beside the test, and the bytes Horovod's
// HTTP client sends it.
#include <cstdint>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "common/horovod_rendezvous.hpp"
#include "tests/support/loopback_connection.hpp"

namespace hvrun::test {

// The server on 127.0.0.1, run by its own io thread as the agent runs it inside its loop.
class ServedRendezvous {
 public:
  explicit ServedRendezvous(std::set<std::string> allowed = {"127.0.0.1"}, HorovodRendezvousLimits limits = {},
                            std::optional<HorovodElasticHooks> elastic = std::nullopt);
  ~ServedRendezvous();
  ServedRendezvous(const ServedRendezvous&) = delete;
  ServedRendezvous& operator=(const ServedRendezvous&) = delete;
  std::uint16_t port() const { return port_; }

  template <typename F>
  auto on_io(F f) -> decltype(f(std::declval<HorovodRendezvous&>())) {
    std::packaged_task<decltype(f(std::declval<HorovodRendezvous&>()))()> task([&] { return f(server_); });
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }

 private:
  boost::asio::io_context io_;
  // The loop runs until the destructor, even when a test has closed the server and nothing is pending.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{io_.get_executor()};
  HorovodRendezvous server_;
  std::uint16_t port_;
  std::thread thread_;
};

// A plain TCP connection speaking bytes, as Horovod's client (third_party/HTTPRequest) does.
class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port) : conn_(port) {}

  void send(std::string_view bytes) { conn_.send(bytes); }

  // One whole response (header and Content-Length bytes of body), or what came before the connection
  // closed or 10 s passed.
  std::string response();

  // True when the server closed the connection within 10 s; the bytes that came first are kept.
  bool closed();
  const std::string& received() const { return in_; }

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline);

  LoopbackConnection conn_;
  std::string in_;
};

// Exactly the request Horovod's client writes: a new connection, HTTP/1.1, Host, Content-Length always.
std::string request(const std::string& method, const std::string& path, const std::string& body = {});

std::string round_trip(std::uint16_t port, const std::string& bytes);

std::string status_line(const std::string& response);

std::string body_of(const std::string& response);

}  // namespace hvrun::test

#include "tests/support/served_rendezvous.hpp"

namespace hvrun::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

ServedRendezvous::ServedRendezvous(std::set<std::string> allowed, HorovodRendezvousLimits limits,
                                   std::optional<HorovodElasticHooks> elastic)
    : server_(io_, HorovodRendezvousOptions{"127.0.0.1", 0, std::move(allowed), limits, std::move(elastic)}),
      port_(server_.port()),
      thread_([this] { io_.run(); }) {}

ServedRendezvous::~ServedRendezvous() {
  boost::asio::post(io_, [this] {
    server_.close();
    work_.reset();
    io_.stop();
  });
  thread_.join();
}

std::string HttpConnection::response() {
  const auto deadline = Clock::now() + 10s;
  for (;;) {
    const auto end = in_.find("\r\n\r\n");
    if (end != std::string::npos) {
      const auto cl = in_.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) {
        const std::size_t length = std::stoul(in_.substr(cl + 16));
        if (in_.size() >= end + 4 + length) {
          std::string r = in_.substr(0, end + 4 + length);
          in_.erase(0, r.size());
          return r;
        }
      }
    }
    if (!read_some(deadline)) return std::exchange(in_, {});
  }
}

bool HttpConnection::closed() {
  const auto deadline = Clock::now() + 10s;
  while (read_some(deadline)) {
  }
  return conn_.closed();
}

bool HttpConnection::read_some(Clock::time_point deadline) {
  const auto bytes = conn_.read_some(deadline);
  if (bytes) in_ += *bytes;
  return bytes.has_value();
}

std::string request(const std::string& method, const std::string& path, const std::string& body) {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string round_trip(std::uint16_t port, const std::string& bytes) {
  HttpConnection c(port);
  c.send(bytes);
  return c.response();
}

std::string status_line(const std::string& response) { return response.substr(0, response.find("\r\n")); }

std::string body_of(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : response.substr(end + 4);
}

}  // namespace hvrun::test

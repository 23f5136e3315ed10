#include "tests/support/loopback_connection.hpp"

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace hvrun::test {

LoopbackConnection::LoopbackConnection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  REQUIRE(fd_);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
}

void LoopbackConnection::send(std::string_view bytes) {
  (void)!::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

std::optional<std::string> LoopbackConnection::read_some(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  if (left <= 0 || eof_) return std::nullopt;
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left)) <= 0) return std::nullopt;
  char buf[65536];
  const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
  if (n <= 0) {
    eof_ = true;
    return std::nullopt;
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace hvrun::test

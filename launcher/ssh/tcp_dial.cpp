#include "launcher/ssh/tcp_dial.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/interface_list.hpp"
#include "launcher/base/name_lookup.hpp"

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;

struct Resolution {
  AddrInfoList addresses;
  DialFailure failure = DialFailure::kNone;
  std::string detail;
};

Resolution resolve(const std::string& host, int port, Clock::time_point deadline) {
  NameLookup::Result r = NameLookup(host, std::to_string(port)).wait(deadline);
  if (!r.addresses) return {nullptr, DialFailure::kNameResolution, std::move(r.error)};
  return {std::move(r.addresses), DialFailure::kNone, {}};
}

// The address as a message shows it: IPv6 in brackets ("[fd00::3]"), as ssh does.
std::string dialled_address_text(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) return address_text(addr);
  if (addr->sa_family == AF_INET6) return "[" + address_text(addr) + "]";
  return "(unknown address family)";
}

DialFailure classify_connect_errno(int err) {
  switch (err) {
    case ECONNREFUSED:
      return DialFailure::kRefused;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
    case EADDRNOTAVAIL:
      return DialFailure::kUnreachable;
    case ETIMEDOUT:
      return DialFailure::kTimeout;
    default:
      return DialFailure::kOther;
  }
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

// Connects to one address before `deadline`; on failure, fills `result` and returns an empty fd.
UniqueFd connect_one(const addrinfo& ai, Clock::time_point deadline, DialResult& result) {
  result.address = dialled_address_text(ai.ai_addr);
  UniqueFd fd(::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd) {
    result.failure = DialFailure::kOther;
    result.detail = std::string("socket: ") + std::strerror(errno);
    return {};
  }
  int rc;
  do {
    rc = ::connect(fd.get(), ai.ai_addr, ai.ai_addrlen);
  } while (rc == -1 && errno == EINTR);
  if (rc == -1 && errno != EINPROGRESS) {
    result.failure = classify_connect_errno(errno);
    result.detail = std::strerror(errno);
    return {};
  }
  if (rc == -1) {
    for (;;) {
      int wait_ms = remaining_ms(deadline);
      if (wait_ms == 0) {
        result.failure = DialFailure::kTimeout;
        result.detail.clear();
        return {};
      }
      pollfd p{fd.get(), POLLOUT, 0};
      int n = ::poll(&p, 1, wait_ms);
      if (n == -1 && errno == EINTR) continue;
      if (n == -1) {
        result.failure = DialFailure::kOther;
        result.detail = std::string("poll: ") + std::strerror(errno);
        return {};
      }
      if (n == 1) break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == -1) err = errno;
    if (err != 0) {
      result.failure = classify_connect_errno(err);
      result.detail = std::strerror(err);
      return {};
    }
  }
  // SSH sends small packets that someone waits for; Nagle would only add latency. Best effort.
  int one = 1;
  (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  result.failure = DialFailure::kNone;
  result.detail.clear();
  return fd;
}

}  // namespace

DialResult dial_tcp(const std::string& host, int port, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  DialResult result;
  Resolution resolution = resolve(host, port, deadline);
  if (resolution.failure != DialFailure::kNone) {
    result.failure = resolution.failure;
    result.detail = std::move(resolution.detail);
    return result;
  }
  // Each address gets what is left of the deadline: a black-holed first address costs the whole
  // timeout (as with OpenSSH's ConnectTimeout), a refusing one costs a round trip.
  for (const addrinfo* ai = resolution.addresses.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd = connect_one(*ai, deadline, result);
    if (fd) {
      result.fd = std::move(fd);
      return result;
    }
    if (result.failure == DialFailure::kTimeout) break;
  }
  return result;
}

}  // namespace hvrun

#include "launcher/tcp_dial.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;

struct AddrInfoFree {
  void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

// One getaddrinfo_a request. It is shared between the waiter and glibc's completion notification,
// so a waiter that gives up at its deadline can leave; the last owner frees the request.
struct Lookup {
  std::string node, service;
  addrinfo hints{};
  gaicb request{};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ~Lookup() {
    if (request.ar_result != nullptr) freeaddrinfo(request.ar_result);
  }
};

void lookup_done(sigval value) {
  std::unique_ptr<std::shared_ptr<Lookup>> owner(static_cast<std::shared_ptr<Lookup>*>(value.sival_ptr));
  Lookup& lookup = **owner;
  std::lock_guard lock(lookup.mu);
  lookup.done = true;
  lookup.cv.notify_all();
}

struct Resolution {
  AddrInfoList addresses;
  DialFailure failure = DialFailure::kNone;
  std::string detail;
};

Resolution resolve(const std::string& host, int port, Clock::time_point deadline) {
  // An address literal needs no resolver (and no resolver thread): the common case with `-H 10.0.0.5`.
  addrinfo numeric_hints{};
  numeric_hints.ai_family = AF_UNSPEC;
  numeric_hints.ai_socktype = SOCK_STREAM;
  numeric_hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* numeric = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &numeric_hints, &numeric) == 0) {
    return {AddrInfoList(numeric), DialFailure::kNone, {}};
  }

  auto lookup = std::make_shared<Lookup>();
  lookup->node = host;
  lookup->service = std::to_string(port);
  lookup->hints.ai_family = AF_UNSPEC;
  lookup->hints.ai_socktype = SOCK_STREAM;
  lookup->hints.ai_flags = AI_NUMERICSERV;  // not AI_ADDRCONFIG: it hides 127.0.0.1 on a host with only lo
  lookup->request.ar_name = lookup->node.c_str();
  lookup->request.ar_service = lookup->service.c_str();
  lookup->request.ar_request = &lookup->hints;

  auto* notify_owner = new std::shared_ptr<Lookup>(lookup);
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD;
  event.sigev_notify_function = lookup_done;
  event.sigev_value.sival_ptr = notify_owner;
  gaicb* requests[] = {&lookup->request};
  int rc = getaddrinfo_a(GAI_NOWAIT, requests, 1, &event);
  if (rc != 0) {
    delete notify_owner;  // not queued: no notification will come
    return {nullptr, DialFailure::kNameResolution, std::string("getaddrinfo_a: ") + gai_strerror(rc)};
  }

  std::unique_lock lock(lookup->mu);
  if (!lookup->cv.wait_until(lock, deadline, [&] { return lookup->done; })) {
    // The request stays queued; its notification frees it whenever the resolver answers.
    return {nullptr, DialFailure::kNameResolution, "no answer from the resolver in time"};
  }
  rc = gai_error(&lookup->request);
  if (rc != 0) {
    std::string detail = gai_strerror(rc);
    if (rc == EAI_SYSTEM) detail += std::string(": ") + std::strerror(errno);
    return {nullptr, DialFailure::kNameResolution, detail};
  }
  AddrInfoList list(std::exchange(lookup->request.ar_result, nullptr));
  if (!list) return {nullptr, DialFailure::kNameResolution, "no addresses"};
  return {std::move(list), DialFailure::kNone, {}};
}

std::string address_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
    return text;
  }
  if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
    return std::string("[") + text + "]";
  }
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
  result.address = address_text(ai.ai_addr);
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

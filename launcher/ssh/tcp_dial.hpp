#pragma once
// Name resolution and TCP connect under one deadline, every failure classified. The first step of an
// SSH connection: libssh's own connect reports every failure as one string, and hvrun must tell a
// refused port from a dropped packet from a name that does not resolve.
#include <chrono>
#include <string>

#include "common/unique_fd.hpp"

namespace hvrun {

enum class DialFailure {
  kNone,            // connected
  kNameResolution,  // the name does not resolve (or the resolver gave no answer in time)
  kRefused,         // nothing listens on that port (RST)
  kUnreachable,     // no route to the address (ENETUNREACH, EHOSTUNREACH, ...)
  kTimeout,         // no answer before the deadline (packets dropped, host down)
  kOther,           // socket() failed or an errno outside the classes above
};

struct DialResult {
  UniqueFd fd;                              // connected, non-blocking, close-on-exec (kNone only)
  DialFailure failure = DialFailure::kNone;
  std::string address;  // the address tried last: "10.0.0.5", "[fe80::1]" (empty if none resolved)
  std::string detail;   // gai_strerror / strerror text; empty for kTimeout and kNone
};

// Resolves `host` (any address family) and connects to its addresses in the resolver's order until one
// accepts, all within `timeout` in total. The lookup runs through getaddrinfo_a, so a resolver that
// never answers is bounded by the same deadline. Never throws for network failures; the result says
// what happened.
DialResult dial_tcp(const std::string& host, int port, std::chrono::milliseconds timeout);

}  // namespace hvrun

#pragma once
// One asynchronous name lookup (getaddrinfo_a with a thread notification) that a caller can wait
// for with a deadline and abandon: many start at once, each is waited for on its own.
//
// Why not gai_suspend(): it keeps its waiting list on the caller's stack and, when one request of
// several completes, may return while the resolver thread is about to notify another request whose
// result it has already stored, and that thread then writes into the returned stack frame (glibc
// 2.36: a crash in __gai_notify; docs/DESIGN.md section 2.1).
#include <netdb.h>

#include <chrono>
#include <memory>
#include <string>

namespace hvrun {

struct AddrInfoFree {
  void operator()(addrinfo* list) const { ::freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

class NameLookup {
 public:
  struct Result {
    AddrInfoList addresses;  // null on failure
    std::string error;       // why not: gai_strerror's text, or that the deadline passed
  };

  // Starts resolving `host` (and `service`, numeric, when not empty) for TCP. An address literal is
  // answered at once, without the resolver thread.
  NameLookup(const std::string& host, const std::string& service);
  ~NameLookup();  // leaves a lookup still under way to the resolver, which frees it when done
  NameLookup(NameLookup&&) noexcept;
  NameLookup& operator=(NameLookup&&) noexcept;

  // Waits until the answer or `deadline`; call once.
  Result wait(std::chrono::steady_clock::time_point deadline);

  struct Shared;  // the request and its completion, shared with glibc's notification (name_lookup.cpp)

 private:
  std::shared_ptr<Shared> shared_;
  Result immediate_;  // a literal's answer, or a getaddrinfo_a failure
  bool answered_ = false;
};

}  // namespace hvrun

#pragma once
// The one exception hierarchy of hvrun. Inside, code throws; at the edge (cmd/), an error becomes one
// line on stderr and an exit code. Every message names the host, interface, flag or peer at fault.
#include <stdexcept>
#include <string>

namespace hvrun {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user gave a flag, host list or hostfile that cannot work; exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A C call failed; the message holds the call, its context and strerror(errno).
class SystemError : public Error {
 public:
  SystemError(const std::string& call, const std::string& context, int err);
  int code() const noexcept { return err_; }

 private:
  int err_;
};

// A peer sent bytes that break the wire rules (bad magic, oversized or truncated frame, bad JSON).
class ProtocolError : public Error {
 public:
  using Error::Error;
};

// A deadline passed; the message says what was awaited and for how long.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A collective (Gloo or NCCL) or its set-up failed; the message names the operation, this rank and,
// where known, the peer.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

// The one line a user sees for an exception caught at an edge: an Error's own message (it names the
// host, flag or peer); for any other exception (a library's: "[json.exception.type_error.316] ...")
// "unexpected failure while DOING (an hvrun bug; --log-level debug shows the details)", the library's
// text logged at debug level only. No library's exception text reaches a user otherwise.
std::string user_message(const std::exception& e, const std::string& doing);

// Throws SystemError for `call` with the current errno. `context` says what it was for ("pipe for rank 3").
[[noreturn]] void throw_errno(const std::string& call, const std::string& context = {});

// Retries a syscall-like expression while it fails with EINTR.
template <typename F>
auto retry_eintr(F&& f) {
  for (;;) {
    auto r = f();
    if (r == -1 && errno == EINTR) continue;
    return r;
  }
}

}  // namespace hvrun

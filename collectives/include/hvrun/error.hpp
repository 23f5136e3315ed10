#pragma once
// The one exception hierarchy of hvrun, public because the collectives library throws it at a training
// program: catch hvrun::Error for any failure, or a subclass. Inside hvrun, code throws; at the edge
// (cmd/, the C interface) an error becomes one line and an exit or result code. Every message names the
// host, interface, flag or peer at fault.
#include <stdexcept>
#include <string>

namespace hvrun {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user gave a flag, host list, hostfile or environment that cannot work; hvrun exits 2.
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

}  // namespace hvrun

#pragma once
// The agent's fingerprints (agent/fingerprint.hpp), taken without holding up its event loop, which
// answers probes and heartbeats meanwhile: the files are read and hashed on a worker thread of the
// taker's own (one per piece of work, ending with it); the interpreter runs as a child on the loop (its stdout read there, its end awaited on a
// pidfd), the whole run within kInterpreterTimeout; the package metadata along its sys.path is read on
// the worker again. A host whose interpreter is slow to start costs its fingerprint that time, nothing
// else.
#include <functional>
#include <memory>
#include <string>

#include "agent/fingerprint.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class FingerprintTaker {
 public:
  using Done = std::function<void(FingerprintMsg)>;
  using Failed = std::function<void(const std::string& error)>;
  explicit FingerprintTaker(boost::asio::io_context& io, FingerprintRoots roots = {});
  // An interpreter still running is killed and not waited for (Child::kill_without_waiting); a worker
  // still reading finishes its piece of work and is joined.
  ~FingerprintTaker();
  FingerprintTaker(const FingerprintTaker&) = delete;
  FingerprintTaker& operator=(const FingerprintTaker&) = delete;

  // Takes one fingerprint; `done` runs on the loop with it, or `failed` with what went wrong (an
  // exception while reading the files: not expected). Several may be under way at once. An interpreter
  // that does not answer in time (or fails) leaves its fields empty, as take_fingerprint does; its child
  // is killed, and its handle kept until it is reaped.
  void take(FingerprintRequestMsg request, Done done, Failed failed);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hvrun

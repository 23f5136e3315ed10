#pragma once
// hvrun's exceptions (the hierarchy is public: hvrun/error.hpp, installed with the collectives) and the
// helpers that turn a failed C call into one.
#include <cerrno>
#include <exception>
#include <string>

#include "hvrun/error.hpp"

namespace hvrun {

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

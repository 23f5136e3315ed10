#pragma once
// Invariant checks: programmer errors, apart from the user's. A user-facing Error says what the user,
// a host or a peer did and what to do; a broken invariant is hvrun's own bug (an optional read while
// empty, a pointer that must be set, an index past its container), and says where in the source it
// broke and which condition failed, so a report of it points at the line. It is thrown rather than
// aborted on so that the launcher still tears every host down and exits 1 through its usual edge.
//
//   HVRUN_INVARIANT(plan.has_value());
//   HVRUN_INVARIANT_MSG(rank < ranks_.size(), "rank " + std::to_string(rank) + " of " + ...);
//
// Both are always on (also with NDEBUG): the checks guard dereferences, which cost more than the check.
#include <string>

#include "common/error.hpp"

namespace hvrun {

// A broken invariant: "internal error (an hvrun bug) at FILE:LINE: CONDITION[: MESSAGE]".
class InternalError : public Error {
 public:
  InternalError(const char* file, int line, const char* condition, const std::string& message = {});
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  const std::string& condition() const noexcept { return condition_; }

 private:
  std::string file_;
  int line_;
  std::string condition_;
};

namespace detail {
[[noreturn]] void invariant_failed(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace hvrun

// Throws InternalError naming this file and line and the condition's text when `cond` is false.
#define HVRUN_INVARIANT(cond)                                                        \
  do {                                                                               \
    if (!(cond)) ::hvrun::detail::invariant_failed(__FILE__, __LINE__, #cond, {}); \
  } while (0)

// The same with `message` (a std::string expression, evaluated only when `cond` is false) appended.
#define HVRUN_INVARIANT_MSG(cond, message)                                                  \
  do {                                                                                      \
    if (!(cond)) ::hvrun::detail::invariant_failed(__FILE__, __LINE__, #cond, (message)); \
  } while (0)

#include "common/error.hpp"

#include <cerrno>
#include <cstring>

namespace hvrun {

namespace {
std::string describe(const std::string& call, const std::string& context, int err) {
  std::string msg = call + " failed";
  if (!context.empty()) msg += " (" + context + ")";
  msg += ": ";
  msg += std::strerror(err);
  return msg;
}
}  // namespace

SystemError::SystemError(const std::string& call, const std::string& context, int err)
    : Error(describe(call, context, err)), err_(err) {}

void throw_errno(const std::string& call, const std::string& context) {
  throw SystemError(call, context, errno);
}

}  // namespace hvrun

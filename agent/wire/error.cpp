#include "agent/wire/error.hpp"

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

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

std::string user_message(const std::exception& e, const std::string& doing) {
  if (dynamic_cast<const Error*>(&e) != nullptr) return e.what();
  spdlog::debug("unexpected exception while {}: {}", doing, e.what());
  return "unexpected failure while " + doing + " (an hvrun bug; --log-level debug shows the details)";
}

void throw_errno(const std::string& call, const std::string& context) {
  throw SystemError(call, context, errno);
}

}  // namespace hvrun

#include "common/user_message.hpp"

#include <spdlog/spdlog.h>

#include "hvrun/error.hpp"

namespace hvrun {

std::string user_message(const std::exception& e, const std::string& doing) {
  if (dynamic_cast<const Error*>(&e) != nullptr) return e.what();
  spdlog::debug("unexpected exception while {}: {}", doing, e.what());
  return "unexpected failure while " + doing + " (an hvrun bug; --hvrun-log-level debug shows the details)";
}

}  // namespace hvrun

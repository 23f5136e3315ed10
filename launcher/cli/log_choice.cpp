#include "launcher/cli/log_choice.hpp"

namespace hvrun {

LogLevel choose_log_level(bool verbose, std::optional<LogLevel> explicit_level) {
  if (explicit_level) return *explicit_level;
  return verbose ? LogLevel::info : kDefaultLogLevel;
}

}  // namespace hvrun

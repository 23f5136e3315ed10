#pragma once
// hvrun's own logging threshold, decided once from --verbose and --hvrun-log-level: the one place that
// decides it (main only applies it, common/log.hpp).
#include <optional>

#include "common/log.hpp"

namespace hvrun {

// hvrun's threshold when nothing asks for another.
inline constexpr LogLevel kDefaultLogLevel = LogLevel::warn;

// An explicit --hvrun-log-level wins, whether --verbose is given or not and in whichever order;
// --verbose alone means info; neither, kDefaultLogLevel.
LogLevel choose_log_level(bool verbose, std::optional<LogLevel> explicit_level);

}  // namespace hvrun

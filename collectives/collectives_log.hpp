#pragma once
// The collectives' own logger, "hvrun.collectives": a training program's default spdlog logger and its
// level are never touched. Off unless HVRUN_LOG_LEVEL (trace, debug, info, warn, error, off) says
// otherwise; lines go to stderr, which hvrun prefixes with the rank.
#include <spdlog/logger.h>

namespace hvrun {

spdlog::logger& collectives_log();

}  // namespace hvrun

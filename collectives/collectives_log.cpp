#include "collectives/collectives_log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace hvrun {

spdlog::logger& collectives_log() {
  // Made once, on first use; not registered in spdlog's registry, so a program's spdlog::drop_all or
  // set_level leaves it alone and its name cannot clash with the program's loggers.
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("hvrun.collectives", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    const char* level = std::getenv("HVRUN_LOG_LEVEL");
    // An unknown name means off: spdlog's from_str answers off for names it does not know.
    l->set_level(level && *level ? spdlog::level::from_str(level) : spdlog::level::off);
    l->set_pattern("hvrun collectives: %l: %v");
    return l;
  }();
  return *logger;
}

}  // namespace hvrun

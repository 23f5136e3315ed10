#pragma once
// Durations as messages show them: "20 s", "0.5 s", "1.25 s".
#include <chrono>
#include <cstdio>
#include <string>

namespace hvrun {

inline std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace hvrun

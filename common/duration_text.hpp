#pragma once
// Durations as every message of hvrun shows them: "20 s", "0.5 s", "1.25 s" (whole milliseconds, no
// trailing zeros, never an exponent). The one definition: launcher, SSH layer, agent and collectives.
#include <chrono>
#include <cstdio>
#include <string>

namespace hvrun {

inline std::string seconds_text(std::chrono::milliseconds d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(d.count()) / 1000.0);
  std::string text = buf;
  // "1.250" → "1.25", "20.000" → "20": milliseconds are exact in three decimals.
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

}  // namespace hvrun

#include "common/program_path.hpp"

#include <unistd.h>

#include <cstdlib>

namespace hvrun {

std::optional<std::string> find_program(std::string_view name, std::optional<std::string_view> path) {
  const char* own = std::getenv("PATH");
  std::string_view dirs = path ? *path : own != nullptr ? own : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + std::string(name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace hvrun

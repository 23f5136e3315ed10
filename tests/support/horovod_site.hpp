#pragma once
// Where the tests find the real Horovod 0.28.1 that scripts/horovod.sh installs: $HVRUN_HOROVOD_DIR or
// /opt/horovod, its Python packages under site/, run by Debian's /usr/bin/python3 (which has torch).
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace hvrun::test {

inline const char* const kDebianPython = "/usr/bin/python3";

inline std::string horovod_site_dir() {
  const char* dir = std::getenv("HVRUN_HOROVOD_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/opt/horovod") + "/site";
}

// The site folder when Horovod's elastic runner and Debian's python are there; nothing otherwise (the
// caller says "skipped: ..." with horovod_missing()).
inline std::optional<std::string> horovod_site() {
  const std::string site = horovod_site_dir();
  if (!std::filesystem::exists(site + "/horovod/runner/elastic/worker.py") || !std::filesystem::exists(kDebianPython))
    return std::nullopt;
  return site;
}

inline std::string horovod_missing() {
  return "skipped: no Horovod in " + horovod_site_dir() + " or no " + kDebianPython +
         " (scripts/horovod.sh installs it; scripts/test.sh runs it)";
}

}  // namespace hvrun::test

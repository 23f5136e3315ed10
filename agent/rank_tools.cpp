#include "agent/rank_tools.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "agent/wire/crash_report.hpp"
#include "agent/wire/error.hpp"
#include "agent/wire/unique_fd.hpp"
#include "agent/wire/write_fully.hpp"

namespace hvrun {

// The bytes of libhvrun_crash.so, built into the agent (agent/CMakeLists.txt, cmake/embed_file.cmake).
extern const unsigned char kCrashHandlerLibrary[];
extern const std::size_t kCrashHandlerLibrary_size;

RankTools::RankTools() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string wanted = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/hvrun-agent.XXXXXX";
  std::string templ = wanted;
  if (::mkdtemp(templ.data()) == nullptr)
    throw_errno("mkdtemp", wanted + ", for hvrun's crash handler; set TMPDIR to a writable directory on this host");
  dir_ = templ;
  library_ = dir_ + "/libhvrun_crash.so";
  stack_dir_ = dir_ + "/stacks";
  try {
    if (::mkdir(stack_dir_.c_str(), 0700) != 0) throw_errno("mkdir", stack_dir_);
    UniqueFd fd(::open(library_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500));
    if (!fd) throw_errno("open", library_);
    if (!write_fully(fd.get(), std::string_view(reinterpret_cast<const char*>(kCrashHandlerLibrary),
                                                kCrashHandlerLibrary_size)))
      throw_errno("write", library_);
    if (::close(fd.release()) != 0) throw_errno("close", library_);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

RankTools::~RankTools() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> RankTools::equip(std::vector<std::string> env) const {
  const std::string off = std::string(crash_report::kCrashHandlerVariable) + "=0";
  for (const auto& e : env)
    if (e == off) return env;
  bool preloaded = false;
  for (auto& e : env)
    if (e.rfind("LD_PRELOAD=", 0) == 0) {
      const std::string user = e.substr(11);
      e = "LD_PRELOAD=" + library_ + (user.empty() ? "" : ":" + user);
      preloaded = true;
    }
  if (!preloaded) env.push_back("LD_PRELOAD=" + library_);
  env.push_back(std::string(crash_report::kStackDirVariable) + "=" + stack_dir_);
#ifdef HVRUN_SANITIZED
  // A sanitized rank (hvrun's own test programs under HVRUN_SANITIZE) refuses any library loaded
  // before its runtime unless told not to check.
  bool asan = false;
  for (auto& e : env)
    if (e.rfind("ASAN_OPTIONS=", 0) == 0) {
      e += ":verify_asan_link_order=0";
      asan = true;
    }
  if (!asan) env.push_back("ASAN_OPTIONS=verify_asan_link_order=0");
#endif
  return env;
}

}  // namespace hvrun

#include "agent/rank_tools.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

#include <spdlog/spdlog.h>

#include "common/checked_directory.hpp"
#include "common/crash_report.hpp"
#include "common/error.hpp"
#include "common/local_hostname.hpp"
#include "common/unique_fd.hpp"
#include "common/write_fully.hpp"

namespace hvrun {

// The bytes of libhvrun_crash.so, built into the agent (agent/CMakeLists.txt, cmake/embed_file.cmake).
extern const unsigned char kCrashHandlerLibrary[];
extern const std::size_t kCrashHandlerLibrary_size;

namespace {

constexpr std::string_view kPrefix = "hvrun-agent.";
constexpr const char* kLockName = "/lock";

// Removes the directories that agents of this user left when they were killed (SIGKILL, the OOM
// killer, a host's reboot with a persistent /tmp): each live agent holds an flock on its directory's
// lock file, which the kernel drops with the process, so a lock this agent can take has no owner. A
// directory without a lock file (an agent between mkdtemp and its lock, or one older than the locks)
// is left alone. Best effort: nothing here stops the agent.
void sweep_orphans(const std::string& tmp) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const std::string lock = it->path().string() + kLockName;
    UniqueFd fd(::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    std::error_code ignored;
    std::filesystem::remove_all(it->path(), ignored);
  }
}

// Whether `dir` is a RAM file system where this user may create a directory whose library the ranks can
// map executable: a tmpfs, writable, not mounted noexec (Docker mounts its /dev/shm so), a directory
// that passes tmpdir_refusal, as /tmp does.
bool usable_tmpfs(const char* dir) {
  struct statfs fs {};
  struct statvfs vfs {};
  struct stat st {};
  if (::statfs(dir, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return false;
  if (::statvfs(dir, &vfs) != 0 || (vfs.f_flag & (ST_NOEXEC | ST_RDONLY)) != 0) return false;
  if (::lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  if (!directory_refusal(dir, st.st_uid, st.st_gid, st.st_mode, ::geteuid(), false).empty()) return false;
  return ::access(dir, W_OK | X_OK) == 0;
}

}  // namespace

std::string RankTools::tmpdir_refusal() {
  const char* tmp_env = std::getenv("TMPDIR");
  if (tmp_env == nullptr || tmp_env[0] == '\0') return {};
  struct stat st{};
  if (::stat(tmp_env, &st) != 0) return {};  // mkdtemp's failure names it
  if (!S_ISDIR(st.st_mode)) return {};
  const std::string why = directory_refusal(tmp_env, st.st_uid, st.st_gid, st.st_mode, ::geteuid(), true);
  return why.empty() ? why : "TMPDIR=" + why;
}

std::string RankTools::base_directory() {
  const char* tmp_env = std::getenv("TMPDIR");
  if (tmp_env != nullptr && tmp_env[0] != '\0' && tmpdir_refusal().empty()) return tmp_env;
  // Every launch makes four inodes here and removes them: on /dev/shm that costs a fifth of the CPU
  // it costs on an ext4 /tmp, on every host (docs/BENCHMARKS.md, "Launch against the SSH floor").
  return usable_tmpfs("/dev/shm") ? "/dev/shm" : "/tmp";
}

std::unique_ptr<RankTools> RankTools::create_or_warn() {
  try {
    if (const std::string why = tmpdir_refusal(); !why.empty())
      spdlog::warn("on {}: {}; hvrun's crash handler goes to {} instead (the ranks' TMPDIR is unchanged)",
                   local_hostname(), why, base_directory());
    return std::make_unique<RankTools>();
  } catch (const Error& e) {
    spdlog::warn("on {}: {}; the ranks run without hvrun's crash handler (no native stacks, no hang autopsy)",
                 local_hostname(), e.what());
    return nullptr;
  }
}

RankTools::RankTools() {
  const std::string base = base_directory();
  try {
    create_in(base);
  } catch (const Error&) {
    if (base != "/dev/shm") throw;
    create_in("/tmp");  // a full /dev/shm (it is sized apart from the disk)
  }
}

void RankTools::create_in(const std::string& tmp) {
  sweep_orphans(tmp);
  const std::string wanted = tmp + "/" + std::string(kPrefix) + "XXXXXX";
  std::string templ = wanted;
  if (::mkdtemp(templ.data()) == nullptr)
    throw_errno("mkdtemp", wanted + ", for hvrun's crash handler; set TMPDIR to a writable directory on this host");
  dir_ = templ;
  library_ = dir_ + "/libhvrun_crash.so";
  stack_dir_ = dir_ + "/stacks";
  try {
    // Locked before it has its name, so that no other agent's sweep ever sees it unlocked.
    const std::string lock = dir_ + kLockName, locking = lock + ".new";
    lock_ = UniqueFd(::open(locking.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400));
    if (!lock_) throw_errno("open", locking);
    if (::flock(lock_.get(), LOCK_EX) != 0) throw_errno("flock", locking);
    if (::rename(locking.c_str(), lock.c_str()) != 0) throw_errno("rename", locking + " to " + lock);
    if (::mkdir(stack_dir_.c_str(), 0700) != 0) throw_errno("mkdir", stack_dir_);
    UniqueFd fd(::open(library_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500));
    if (!fd) throw_errno("open", library_);
    if (!write_fully(fd.get(), std::string_view(reinterpret_cast<const char*>(kCrashHandlerLibrary),
                                                kCrashHandlerLibrary_size)))
      throw_errno("write", library_);
    if (::close(fd.release()) != 0) throw_errno("close", library_);
  } catch (...) {
    lock_ = UniqueFd();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
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

#include "common/open_files_limit.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "common/log.hpp"

namespace hvrun {

namespace {

// Written once by raise_open_files_limit() before any thread exists.
rlimit g_original{};
std::atomic<bool> g_raised{false};

std::string limit_text(rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v); }

}  // namespace

void raise_open_files_limit() {
  if (g_raised.load()) return;
  rlimit current{};
  if (::getrlimit(RLIMIT_NOFILE, &current) != 0) {
    log_of(LogSubsys::kProc)
        .debug("getrlimit(RLIMIT_NOFILE) failed: {}; the open files limit stays as it is", std::strerror(errno));
    return;
  }
  if (current.rlim_cur == current.rlim_max) return;
  rlimit raised = current;
  raised.rlim_cur = current.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    log_of(LogSubsys::kProc)
        .debug("setrlimit(RLIMIT_NOFILE, {}) failed: {}; the open files limit stays at {}", limit_text(raised.rlim_cur),
               std::strerror(errno), limit_text(current.rlim_cur));
    return;
  }
  g_original = current;
  g_raised.store(true);
  log_of(LogSubsys::kProc)
      .debug("open files limit raised from {} to {} (the processes hvrun starts get {} back)",
             limit_text(current.rlim_cur), limit_text(raised.rlim_cur), limit_text(current.rlim_cur));
}

rlimit original_open_files_limit() {
  if (g_raised.load()) return g_original;
  rlimit current{};
  if (::getrlimit(RLIMIT_NOFILE, &current) != 0) {
    // No limit to report; RLIM_INFINITY says "not known" without failing a caller that only logs it.
    current.rlim_cur = current.rlim_max = RLIM_INFINITY;
  }
  return current;
}

std::vector<std::string> with_original_open_files_limit(std::vector<std::string> argv) {
  if (!g_raised.load()) return argv;
  // Lowering a soft limit is always allowed; should it fail, the shell says so on stderr and goes on.
  std::vector<std::string> wrapped{"/bin/sh", "-c", "ulimit -Sn " + limit_text(g_original.rlim_cur) + "; exec \"$@\"",
                                   "hvrun-nofile"};
  wrapped.insert(wrapped.end(), std::make_move_iterator(argv.begin()), std::make_move_iterator(argv.end()));
  return wrapped;
}

void restore_open_files_limit(pid_t pid, const std::string& what) {
  if (!g_raised.load()) return;
  if (::prlimit(pid, RLIMIT_NOFILE, &g_original, nullptr) != 0) {
    log_of(LogSubsys::kProc)
        .debug("prlimit(RLIMIT_NOFILE) for {} (pid {}) failed: {}; it keeps the raised open files limit", what, pid,
               std::strerror(errno));
  }
}

std::optional<rlimit> open_files_limit_for_children() {
  if (!g_raised.load()) return std::nullopt;
  return g_original;
}

}  // namespace hvrun

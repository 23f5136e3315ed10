#include "common/owned_children.hpp"

#include <sys/wait.h>

#include <cerrno>

#include "common/error.hpp"

namespace hvrun {

OwnedChildren& OwnedChildren::get() {
  // Never destroyed: a detached thread of the launcher may still start or reap a child at exit.
  static OwnedChildren& list = *new OwnedChildren;
  return list;
}

void OwnedChildren::add(pid_t pid) {
  std::lock_guard lock(mu_);
  pids_.insert(pid);
}

pid_t OwnedChildren::reap(pid_t pid, int* wait_status, int options, rusage* usage) {
  std::lock_guard lock(mu_);
  const pid_t r = retry_eintr([&] { return ::wait4(pid, wait_status, options, usage); });
  if (r != 0) {
    const int err = errno;
    pids_.erase(pid);
    errno = err;
  }
  return r;
}

void OwnedChildren::remove(pid_t pid) {
  std::lock_guard lock(mu_);
  pids_.erase(pid);
}

std::size_t OwnedChildren::reap_unowned(const std::vector<pid_t>& children) {
  std::unique_lock no_start(starting_);
  std::lock_guard lock(mu_);
  std::size_t reaped = 0;
  for (const pid_t pid : children) {
    if (pid <= 0 || pids_.contains(pid)) continue;
    int st = 0;
    if (retry_eintr([&] { return ::waitpid(pid, &st, WNOHANG); }) == pid) ++reaped;
  }
  return reaped;
}

}  // namespace hvrun

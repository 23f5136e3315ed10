#include "common/exit_status.hpp"

#include <sys/wait.h>

#include <cstring>

namespace hvrun {

ExitStatus ExitStatus::of(int wait_status) {
  if (WIFSIGNALED(wait_status)) return {128 + WTERMSIG(wait_status), WTERMSIG(wait_status)};
  return {WEXITSTATUS(wait_status), 0};
}

std::string ExitStatus::text() const {
  if (signal != 0) return "was killed by " + signal_name(signal);
  return "exited with code " + std::to_string(code);
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace hvrun

#pragma once
// How a child process ended, as a shell reports it: its exit code, or 128+N when signal N ended it.
#include <string>

namespace hvrun {

struct ExitStatus {
  int code = 0;    // the exit code, or 128+N when signal N ended the process
  int signal = 0;  // N when signal N ended the process, else 0

  // From a status that waitpid(2) filled in for a process that has ended.
  static ExitStatus of(int wait_status);
  // "exited with code 3", "was killed by SIGTERM".
  std::string text() const;
};

// "SIGSEGV" for 11; "signal 64" for numbers without a name.
std::string signal_name(int sig);

}  // namespace hvrun

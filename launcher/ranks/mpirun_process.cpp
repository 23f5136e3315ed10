#include "launcher/ranks/mpirun_process.hpp"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "common/open_files_limit.hpp"
#include "common/program_path.hpp"

namespace hvrun {

std::optional<std::string> find_mpirun() { return find_program("mpirun"); }

std::string known_hosts_for_mpirun() {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return {};
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const int rc = ::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found);
  if (rc == 0 && found != nullptr && std::string_view(found->pw_dir) == home) return {};
  return std::string(home) + "/.ssh/known_hosts";
}

Child start_mpirun(const std::vector<std::string>& argv) {
  // In hvrun's process group, with hvrun's streams and environment.
  ChildSpec spec{.argv = argv,
                 .death_signal = SIGTERM,
                 .open_files = open_files_limit_for_children(),
                 .start_by = StartBy::kFork,
                 .what = "mpirun"};
  try {
    return Child::start(spec);
  } catch (const SpawnError& e) {
    const int err = e.error_number();
    throw Error("--mpi: cannot execute '" + argv[0] + "': " + std::strerror(err) +
                (err == ENOENT ? "; install Open MPI (apt-get install openmpi-bin) or put mpirun on PATH" : ""));
  }
}

bool signal_from_terminal() {
  const pid_t foreground = ::isatty(STDIN_FILENO) ? ::tcgetpgrp(STDIN_FILENO) : -1;
  return foreground > 0 && foreground == ::getpgrp();
}

namespace {

// The signals hvrun passes on to mpirun, blocked while held (so that sigtimedwait takes them), the
// previous mask restored after.
class PassedSignals {
 public:
  PassedSignals() {
    sigemptyset(&set_);
    for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set_, s);
    if (::pthread_sigmask(SIG_BLOCK, &set_, &previous_) != 0) throw_errno("pthread_sigmask", "waiting for mpirun");
  }
  ~PassedSignals() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  PassedSignals(const PassedSignals&) = delete;
  PassedSignals& operator=(const PassedSignals&) = delete;
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_, previous_;
};

}  // namespace

int wait_mpirun(Child& mpirun) {
  const PassedSignals passed;
  for (;;) {
    if (const auto status = mpirun.try_wait()) return status->code;
    // A second's timeout also catches a SIGCHLD that came before the wait.
    const timespec second{1, 0};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&passed.set(), &info, &second);
    // A terminal's Ctrl-C reaches mpirun itself (same process group, si_code SI_KERNEL); pass on
    // only what was sent to hvrun alone.
    if (sig > 0 && sig != SIGCHLD && info.si_code != SI_KERNEL) mpirun.signal(sig);
  }
}

int run_mpirun(const std::vector<std::string>& argv) {
  const PassedSignals passed;  // from before the start, so that none meant for mpirun comes between
  Child mpirun = start_mpirun(argv);
  return wait_mpirun(mpirun);
}

}  // namespace hvrun

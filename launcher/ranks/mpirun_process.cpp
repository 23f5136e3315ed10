#include "launcher/ranks/mpirun_process.hpp"

#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include "agent/wire/error.hpp"
#include "agent/wire/unique_fd.hpp"
#include "launcher/base/open_files_limit.hpp"
#include "launcher/base/program_path.hpp"

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

int run_mpirun(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Pipe status = make_pipe("exec status of mpirun");

  // The signals hvrun passes on are taken synchronously below: blocked from before the fork.
  sigset_t watched, previous;
  sigemptyset(&watched);
  for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&watched, s);
  if (::pthread_sigmask(SIG_BLOCK, &watched, &previous) != 0) throw_errno("pthread_sigmask", "waiting for mpirun");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork", "starting mpirun");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(s, SIG_DFL);
    restore_open_files_limit_in_child();
    if (::getppid() == parent) ::execvp(args[0], args.data());
    const int err = errno;
    [[maybe_unused]] auto n = ::write(status.write.get(), &err, sizeof err);
    ::_exit(127);
  }
  status.write.reset();
  int err = 0;
  if (retry_eintr([&] { return ::read(status.read.get(), &err, sizeof err); }) == static_cast<ssize_t>(sizeof err)) {
    retry_eintr([&] { return ::waitpid(pid, nullptr, 0); });
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw Error("--mpi: cannot execute '" + argv[0] + "': " + std::strerror(err) +
                (err == ENOENT ? "; install Open MPI (apt-get install openmpi-bin) or put mpirun on PATH" : ""));
  }
  int wstatus = 0;
  for (;;) {
    const pid_t done = retry_eintr([&] { return ::waitpid(pid, &wstatus, WNOHANG); });
    if (done == pid) break;
    if (done < 0) throw_errno("waitpid", "mpirun");
    // A second's timeout also catches a SIGCHLD that came before the wait.
    const timespec second{1, 0};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&watched, &info, &second);
    // A terminal's Ctrl-C reaches mpirun itself (same process group, si_code SI_KERNEL); pass on
    // only what was sent to hvrun alone.
    if (sig > 0 && sig != SIGCHLD && info.si_code != SI_KERNEL && ::kill(pid, sig) != 0 && errno != ESRCH)
      throw_errno("kill", "passing a signal on to mpirun");
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return WEXITSTATUS(wstatus);
}

}  // namespace hvrun

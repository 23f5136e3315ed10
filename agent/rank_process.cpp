#include "agent/rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/wire/error.hpp"

extern char** environ;

namespace hvrun {

namespace {

// What the child reports through the close-on-exec status pipe when it cannot exec.
struct ChildFailure {
  int stage;  // 0: chdir, 1: exec, 2: set-up (dup2, open /dev/null)
  int err;
};

[[noreturn]] void child_fail(int fd, int stage) {
  ChildFailure f{stage, errno};
  // Nothing useful can be done if this write fails; the parent then sees an exit code of 127.
  [[maybe_unused]] auto n = ::write(fd, &f, sizeof f);
  ::_exit(127);
}

// What to do about an exec failure, for the one line users see ("" when errno says it all).
std::string exec_fix(const std::string& program, int err) {
  const bool has_path = program.find('/') != std::string::npos;
  switch (err) {
    case ENOENT:
      return has_path ? "; check the path on this host"
                      : "; not on this host's PATH: install it there, give its full path, or set PATH with -x";
    case EACCES:
      return "; is it a directory, or a file without execute permission (chmod +x)?";
    case ENOEXEC:
      return "; not a binary this host can run, nor a script starting with #!";
    default:
      return "";
  }
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

RankProcess spawn_rank(const RankSpawnSpec& spec) {
  if (spec.argv.empty()) throw SpawnError("no command to execute");
  Pipe out = make_pipe("stdout of a rank");
  Pipe err = make_pipe("stderr of a rank");
  Pipe status = make_pipe("exec status of a rank");
  // Everything the child touches is prepared before fork: after it, only async-signal-safe calls.
  auto argv = c_strings(spec.argv);
  auto envp = c_strings(spec.env);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork", "starting " + spec.argv[0]);
  if (pid == 0) {
    const int sfd = status.write.get();
    // SIGKILL when the agent dies, even by SIGKILL.
    if (!detach_child(SIGKILL, parent)) ::_exit(127);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(out.write.get(), 1) < 0 ||
        ::dup2(err.write.get(), 2) < 0)
      child_fail(sfd, 2);
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) child_fail(sfd, 0);
    // execvp searches the PATH of `environ`, so the rank's own PATH (e.g. from -x) decides.
    environ = envp.data();
    ::execvp(argv[0], argv.data());
    child_fail(sfd, 1);
  }
  // Also set the group from the parent so a signal sent right after fork reaches the right group.
  ::setpgid(pid, pid);
  status.write.reset();
  out.write.reset();
  err.write.reset();

  ChildFailure failure{};
  const ssize_t n = retry_eintr([&] { return ::read(status.read.get(), &failure, sizeof failure); });
  if (n == static_cast<ssize_t>(sizeof failure)) {
    retry_eintr([&] { return ::waitpid(pid, nullptr, 0); });
    const std::string reason = std::strerror(failure.err);
    switch (failure.stage) {
      case 0: throw SpawnError("cannot enter working directory '" + spec.cwd + "': " + reason);
      case 1:
        throw SpawnError("cannot execute '" + spec.argv[0] + "': " + reason + exec_fix(spec.argv[0], failure.err));
      default: throw SpawnError("cannot set up the standard streams of '" + spec.argv[0] + "': " + reason);
    }
  }
  return RankProcess{pid, std::move(out.read), std::move(err.read)};
}

bool detach_child(int death_signal, pid_t parent) noexcept {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, death_signal);
  if (::getppid() != parent) return false;
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  return true;
}

void signal_group(pid_t pgid, int sig) {
  if (pgid <= 0) return;
  if (::kill(-pgid, sig) != 0 && errno != ESRCH) throw_errno("kill", "process group " + std::to_string(pgid));
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace hvrun

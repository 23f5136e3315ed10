#include "common/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/byte_tail.hpp"
#include "common/close_on_exec.hpp"
#include "common/invariant.hpp"
#include "common/io_sizes.hpp"
#include "common/owned_children.hpp"

extern char** environ;

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;

// Caught or ignored by hvrun and the agent; every child starts with them at their defaults.
constexpr std::array<int, 4> kDefaultSignals = {SIGPIPE, SIGINT, SIGTERM, SIGHUP};

// What a child started by fork_child reports when it cannot exec.
struct ChildFailure {
  SpawnError::Step step;
  int err;
};

const std::string& program_of(const ChildSpec& spec) { return spec.program.empty() ? spec.argv[0] : spec.program; }

std::string failure_text(const ChildSpec& spec, SpawnError::Step step, int err) {
  const std::string reason = std::strerror(err);
  switch (step) {
    case SpawnError::Step::kChdir: return "cannot enter working directory '" + spec.cwd + "': " + reason;
    case SpawnError::Step::kSetup:
      return "cannot set up the standard streams (or close the other descriptors) of '" + program_of(spec) + "': " + reason;
    case SpawnError::Step::kExec: break;
  }
  return "cannot execute '" + program_of(spec) + "': " + reason;
}

// The descriptor the child gets as stream n, or -1 (inherit) or -2 (/dev/null); pipes are made here.
struct PreparedStreams {
  std::array<int, 3> child_fd{-1, -1, -1};
  std::array<UniqueFd, 3> child_end, parent_end;
};
constexpr int kDevNull = -2;

PreparedStreams prepare_streams(const ChildSpec& spec) {
  PreparedStreams s;
  for (std::size_t n = 0; n < 3; ++n) {
    const ChildStream& c = spec.stdio[n];
    switch (c.kind) {
      case ChildStream::Kind::kInherit: break;
      case ChildStream::Kind::kDevNull: s.child_fd[n] = kDevNull; break;
      case ChildStream::Kind::kFd:
        HVRUN_INVARIANT(c.fd >= 0);
        s.child_fd[n] = c.fd;
        break;
      case ChildStream::Kind::kPipe: {
        Pipe p = make_pipe(c.what);
        // The child reads stdin from the pipe and writes its outputs into it.
        s.child_end[n] = std::move(n == 0 ? p.read : p.write);
        s.parent_end[n] = std::move(n == 0 ? p.write : p.read);
        s.child_fd[n] = s.child_end[n].get();
        break;
      }
    }
  }
  return s;
}

// AddressSanitizer's bookkeeping before a call that does not return (__asan_handle_no_return) takes the
// child's own stack for a thread's and fails: the code that runs in the child is not instrumented.
#define HVRUN_IN_CHILD __attribute__((no_sanitize("address")))

// In the child: stream n from `fd` (-1: left as it is). Async-signal-safe.
HVRUN_IN_CHILD bool set_stream(int n, int fd) noexcept {
  if (fd == -1) return true;
  if (fd == kDevNull) {
    const int null_fd = ::open("/dev/null", (n == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
    if (null_fd < 0) return false;
    fd = null_fd;
  }
  // dup2 onto itself keeps close-on-exec set; the flag is cleared by hand then.
  if (fd == n) return ::fcntl(n, F_SETFD, 0) == 0;
  return ::dup2(fd, n) == n;
}

// The files execvp would try for `program`, in its order, searching the PATH the child will have: its
// own environment's when the spec gives one (glibc's execvp reads the caller's, which a child sharing
// our memory must not replace), else ours; glibc's default without any. An empty PATH entry is the
// working directory.
std::vector<std::string> exec_candidates(const std::string& program, const std::optional<std::vector<std::string>>& env) {
  if (program.find('/') != std::string::npos) return {program};
  std::optional<std::string> path;
  if (env) {
    const auto it = std::find_if(env->begin(), env->end(), [](const std::string& kv) { return kv.starts_with("PATH="); });
    if (it != env->end()) path = it->substr(5);
  } else if (const char* p = ::getenv("PATH")) {
    path = p;
  }
  const std::string dirs = path.value_or("/bin:/usr/bin");
  std::vector<std::string> out;
  for (std::size_t at = 0;;) {
    const std::size_t colon = dirs.find(':', at);
    const std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    out.push_back(dir.empty() ? program : dir + "/" + program);
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  return out;
}

// Everything the child of fork_child reads, made by the parent before the child exists: the child runs
// on the parent's memory and may not allocate. It writes only `failure`.
struct ChildPlan {
  const ChildSpec& spec;
  const PreparedStreams& streams;
  char* const* argv;
  char* const* envp;
  std::vector<std::string> candidates;
  std::vector<char*> shell_argv;  // /bin/sh, a candidate (set by the child), argv[1..], null
  pid_t parent;
  std::optional<ChildFailure> failure;
};

[[noreturn]] HVRUN_IN_CHILD void child_failed(ChildPlan& plan, SpawnError::Step step) noexcept {
  plan.failure = ChildFailure{step, errno};
  ::_exit(127);
}

// The child: set-up, then execve of each candidate as execvp would (a file without a #! line runs
// under /bin/sh; EACCES is reported when no candidate ran and one was not executable). Only system
// calls: no allocation, no lock, nothing that another thread of the parent could hold.
HVRUN_IN_CHILD int run_child(void* arg) noexcept {
  ChildPlan& plan = *static_cast<ChildPlan*>(arg);
  const ChildSpec& spec = plan.spec;
  // No handler of the parent's may run here, on its memory: every caught signal goes back to its
  // default while all are blocked (the parent blocked them before the clone), and so do the ones the
  // launcher and the agent ignore. Other ignored signals stay ignored, as across any exec.
  struct sigaction default_action{};
  default_action.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    struct sigaction old{};
    if (::sigaction(s, nullptr, &old) != 0) continue;  // the signals glibc reserves
    const bool reset = std::find(kDefaultSignals.begin(), kDefaultSignals.end(), s) != kDefaultSignals.end();
    if (reset || (old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL)) ::sigaction(s, &default_action, nullptr);
  }
  if (spec.own_group) ::setpgid(0, 0);
  if (spec.death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, spec.death_signal);
    // Armed after the parent may have died: then no signal comes, and the child must not run alone.
    if (::getppid() != plan.parent) ::_exit(127);
  }
  // A failure leaves the parent's limit; the child goes on.
  if (spec.open_files) (void)::setrlimit(RLIMIT_NOFILE, &*spec.open_files);
  for (int n = 0; n < 3; ++n)
    if (!set_stream(n, plan.streams.child_fd[static_cast<std::size_t>(n)])) child_failed(plan, SpawnError::Step::kSetup);
  if (!others_close_on_exec()) child_failed(plan, SpawnError::Step::kSetup);
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) child_failed(plan, SpawnError::Step::kChdir);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  bool denied = false;
  for (const std::string& file : plan.candidates) {
    ::execve(file.c_str(), plan.argv, plan.envp);
    if (errno == ENOEXEC) {
      plan.shell_argv[1] = const_cast<char*>(file.c_str());
      ::execve("/bin/sh", plan.shell_argv.data(), plan.envp);
      child_failed(plan, SpawnError::Step::kExec);
    }
    if (errno == EACCES) {
      denied = true;
    } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV && errno != ETIMEDOUT) {
      child_failed(plan, SpawnError::Step::kExec);
    }
  }
  if (denied) errno = EACCES;
  child_failed(plan, SpawnError::Step::kExec);
  return 127;
}

// The child's stack: execve and the set-up calls need little; a sanitized build's frames are larger.
constexpr std::size_t kChildStack = 256 * 1024;

// A vfork-style child (CLONE_VM | CLONE_VFORK, as glibc's posix_spawn): it runs on this process's
// memory until it executes, and this thread waits until then. A fork would copy the page tables, and
// this process would then take a copy-on-write fault on every page it writes next; on a virtual machine
// whose faults are dear that was the largest part of an agent's cost of starting a rank.
pid_t fork_child(const ChildSpec& spec, const PreparedStreams& streams) {
  const CStringArray argv(spec.argv);
  const std::optional<CStringArray> envp = spec.env ? std::optional<CStringArray>(CStringArray(*spec.env)) : std::nullopt;
  ChildPlan plan{.spec = spec,
                 .streams = streams,
                 .argv = argv.get(),
                 .envp = envp ? envp->get() : environ,
                 .candidates = exec_candidates(program_of(spec), spec.env),
                 .shell_argv = {},
                 .parent = ::getpid(),
                 .failure = std::nullopt};
  plan.shell_argv.push_back(const_cast<char*>("/bin/sh"));
  plan.shell_argv.push_back(nullptr);
  for (std::size_t i = 1; i < spec.argv.size(); ++i) plan.shell_argv.push_back(const_cast<char*>(spec.argv[i].c_str()));
  plan.shell_argv.push_back(nullptr);

  void* stack = ::mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) throw_errno("mmap", "a stack for starting " + spec.what);
  struct StackFree {
    void* at;
    ~StackFree() { ::munmap(at, kChildStack); }
  } stack_free{stack};
  // Blocked from before the clone until the child has reset its handlers: no handler of ours runs in it.
  sigset_t all, old;
  sigfillset(&all);
  if (const int rc = ::pthread_sigmask(SIG_BLOCK, &all, &old); rc != 0) throw SystemError("pthread_sigmask", spec.what, rc);
  const pid_t pid = ::clone(run_child, static_cast<char*>(stack) + kChildStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    errno = clone_errno;
    throw_errno("clone", "starting " + spec.what);
  }
  // The child has executed or failed: its process group was set before (no race with a signal).
  if (plan.failure) {
    retry_eintr([&] { return ::waitpid(pid, nullptr, 0); });
    throw SpawnError(failure_text(spec, plan.failure->step, plan.failure->err), plan.failure->step, plan.failure->err);
  }
  return pid;
}

pid_t spawn_child(const ChildSpec& spec, const PreparedStreams& streams) {
  HVRUN_INVARIANT_MSG(!spec.env && spec.cwd.empty() && spec.death_signal == 0 && !spec.open_files,
                      "posix_spawnp runs no code in the child: " + spec.what);
  posix_spawn_file_actions_t actions;
  if (const int rc = ::posix_spawn_file_actions_init(&actions); rc != 0)
    throw SystemError("posix_spawn_file_actions_init", spec.what, rc);
  struct ActionsFree {
    posix_spawn_file_actions_t* a;
    ~ActionsFree() { ::posix_spawn_file_actions_destroy(a); }
  } actions_free{&actions};
  for (int n = 0; n < 3; ++n) {
    const int fd = streams.child_fd[static_cast<std::size_t>(n)];
    if (fd == -1) continue;
    const int rc = fd == kDevNull
                       ? ::posix_spawn_file_actions_addopen(&actions, n, "/dev/null", n == 0 ? O_RDONLY : O_WRONLY, 0)
                       : ::posix_spawn_file_actions_adddup2(&actions, fd, n);
    if (rc != 0) throw SystemError("posix_spawn_file_actions", spec.what, rc);
  }
  // Nothing but 0, 1 and 2 reaches the child, whatever was opened without close-on-exec (Asio's sockets).
  if (const int rc = ::posix_spawn_file_actions_addclosefrom_np(&actions, 3); rc != 0)
    throw SystemError("posix_spawn_file_actions_addclosefrom_np", spec.what, rc);
  posix_spawnattr_t attr;
  if (const int rc = ::posix_spawnattr_init(&attr); rc != 0) throw SystemError("posix_spawnattr_init", spec.what, rc);
  struct AttrFree {
    posix_spawnattr_t* a;
    ~AttrFree() { ::posix_spawnattr_destroy(a); }
  } attr_free{&attr};
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (const int s : kDefaultSignals) sigaddset(&defaults, s);
  const short flags = static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                         (spec.own_group ? POSIX_SPAWN_SETPGROUP : 0));
  for (const int rc : {::posix_spawnattr_setflags(&attr, flags), ::posix_spawnattr_setpgroup(&attr, 0),
                       ::posix_spawnattr_setsigmask(&attr, &none), ::posix_spawnattr_setsigdefault(&attr, &defaults)}) {
    if (rc != 0) throw SystemError("posix_spawnattr_set*", spec.what, rc);
  }
  const CStringArray argv(spec.argv);
  pid_t pid = -1;
  // glibc reports a failed exec here (the child ran on our memory until then): no exit code 127 to read.
  if (const int rc = ::posix_spawnp(&pid, program_of(spec).c_str(), &actions, &attr, argv.get(), environ); rc != 0)
    throw SpawnError(failure_text(spec, SpawnError::Step::kExec, rc), SpawnError::Step::kExec, rc);
  return pid;  // the child has executed: its group was set before (POSIX_SPAWN_SETPGROUP)
}

}  // namespace

CStringArray::CStringArray(const std::vector<std::string>& strings) {
  pointers_.reserve(strings.size() + 1);
  for (const auto& s : strings) pointers_.push_back(const_cast<char*>(s.c_str()));
  pointers_.push_back(nullptr);
}

Child Child::start(const ChildSpec& spec) {
  if (spec.argv.empty()) throw SpawnError(spec.what + ": no command to execute", SpawnError::Step::kExec, ENOENT);
  PreparedStreams streams = prepare_streams(spec);
  Child child;
  {
    const auto starting = OwnedChildren::get().starting();
    child.pid_ = spec.start_by == StartBy::kSpawn ? spawn_child(spec, streams) : fork_child(spec, streams);
    OwnedChildren::get().add(child.pid_);
  }
  child.leads_group_ = spec.own_group;
  child.what_ = spec.what;
  child.streams_ = std::move(streams.parent_end);
  return child;
}

Child::~Child() { kill_and_reap(); }

void Child::kill_and_reap() noexcept {
  if (pid_ <= 0 || status_) return;
  try {
    signal(SIGKILL);
  } catch (const Error&) {
    // kill can only fail with EPERM here, which our own child cannot give; the wait still reaps it.
  }
  try {
    wait();
  } catch (const Error&) {
    // Reaped by someone else: the handle owns no child now.
  }
  pid_ = -1;
}

void Child::disown() noexcept {
  OwnedChildren::get().remove(pid_);
  pid_ = -1;
  streams_ = {};
}

void Child::kill_without_waiting() noexcept {
  if (pid_ <= 0 || status_) return;
  try {
    signal(SIGKILL);
    if (reap(WNOHANG)) return;
  } catch (const Error&) {
    return;  // reaped by someone else: nothing is left to let go
  }
  disown();
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      leads_group_(other.leads_group_),
      what_(std::move(other.what_)),
      streams_(std::move(other.streams_)),
      status_(std::exchange(other.status_, std::nullopt)),
      usage_(other.usage_) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    leads_group_ = other.leads_group_;
    what_ = std::move(other.what_);
    streams_ = std::move(other.streams_);
    status_ = std::exchange(other.status_, std::nullopt);
    usage_ = other.usage_;
  }
  return *this;
}

UniqueFd Child::take_stream(int n) {
  HVRUN_INVARIANT(n >= 0 && n < 3);
  return std::move(streams_[static_cast<std::size_t>(n)]);
}

bool Child::reap(int options) {
  int st = 0;
  const pid_t r = OwnedChildren::get().reap(pid_, &st, options, &usage_);
  if (r == 0) return false;
  if (r < 0) lost();
  status_ = ExitStatus::of(st);
  return true;
}

std::optional<ExitStatus> Child::try_wait() {
  if (status_) return status_;
  HVRUN_INVARIANT_MSG(pid_ > 0, "a wait on a Child handle that owns no child: " + what_);
  if (!reap(WNOHANG)) return std::nullopt;
  return status_;
}

ExitStatus Child::wait() {
  if (status_) return *status_;
  HVRUN_INVARIANT_MSG(pid_ > 0, "a wait on a Child handle that owns no child: " + what_);
  // Waits without reaping (WNOWAIT), then reaps under the lock of reap(): no lock is held while it runs.
  for (;;) {
    siginfo_t info{};
    if (retry_eintr([&] { return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT); }) < 0) {
      const int err = errno;
      OwnedChildren::get().remove(pid_);
      errno = err;
      lost();
    }
    if (reap(WNOHANG)) return *status_;
  }
}

void Child::lost() {
  // ECHILD: reaped elsewhere (a waitpid(-1) of someone else's, SIGCHLD ignored); how it ended is not known.
  const int err = errno;
  pid_ = -1;
  throw SystemError("waitpid", what_, err);
}

UniqueFd Child::end_descriptor() const {
  HVRUN_INVARIANT_MSG(pid_ > 0 && !status_, "the end of a child this handle does not own: " + what_);
  // The raw syscall: glibc's pidfd_open wrapper would make the agent need glibc 2.36. Close-on-exec.
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
}

std::optional<ExitStatus> Child::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  if (auto s = try_wait()) return s;
  // A pidfd turns readable when the child ends, so the wait is one poll, not a sleep loop.
  if (const UniqueFd pidfd = end_descriptor(); pidfd) {
    pollfd p{pidfd.get(), POLLIN, 0};
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      const int rc = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) throw_errno("poll", "the end of " + what_);
      return try_wait();  // ended (rc 1), or one last look at the deadline
    }
  }
  // Kernels before 5.3 have no pidfd_open (ENOSYS): look again with growing pauses.
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    const auto now = Clock::now();
    if (now >= deadline) return try_wait();
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    if (auto s = try_wait()) return s;
  }
}

void Child::signal(int sig) {
  if (pid_ <= 0 || status_) return;  // never a signal to a pid that may have been reused
  if (leads_group_) {
    signal_group(pid_, sig);
  } else if (::kill(pid_, sig) != 0 && errno != ESRCH) {
    throw_errno("kill", what_);
  }
}

pid_t Child::release() {
  const pid_t pid = pid_;
  if (pid > 0 && !status_) disown();
  pid_ = -1;
  streams_ = {};
  return pid;
}

std::optional<ChildOutput> Child::read_outputs(std::chrono::milliseconds timeout, std::size_t limit) {
  const auto deadline = Clock::now() + timeout;
  std::array<ByteTail, 2> tails{ByteTail(limit), ByteTail(limit)};
  std::array<pollfd, 2> fds = {pollfd{streams_[1].get(), POLLIN, 0}, pollfd{streams_[2].get(), POLLIN, 0}};
  std::vector<char> buffer(kIoChunk);
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) == -1) {
      if (errno == EINTR) continue;
      throw_errno("poll", what_);
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n == -1 && errno == EINTR) continue;
      if (n == -1) throw_errno("read", "output of " + what_);
      if (n == 0) {
        fds[i].fd = -1;
        streams_[i + 1].reset();
        continue;
      }
      tails[i].append(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    }
  }
  return ChildOutput{tails[0].text(), tails[1].text()};
}

std::size_t reap_unowned_children(const std::vector<pid_t>& children) {
  return OwnedChildren::get().reap_unowned(children);
}

void signal_group(pid_t pgid, int sig) {
  if (pgid <= 0) return;
  if (::kill(-pgid, sig) != 0 && errno != ESRCH) throw_errno("kill", "process group " + std::to_string(pgid));
}

}  // namespace hvrun

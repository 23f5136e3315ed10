#pragma once
// The one owner of child processes, for the launcher and the agent alike. A child is described once
// (ChildSpec) and started by Child::start, which prepares everything the new process touches before
// it exists, reports a failed exec as a SpawnError with the program's name and strerror, and hands
// back a handle that reaps the child, killing it first if it is still there when the handle goes.
// Every child a handle owns is reaped through that handle alone (by its pid, never waitpid(-1)), so
// one owner never takes another's exit status; a subreaper (the agent) reaps what it adopts, and what
// no handle owns, with reap_unowned_children.
//
// Two ways to start, chosen by the caller:
//  - kFork: the child runs set-up code of its own before it executes (PR_SET_PDEATHSIG, a working
//    directory, an open files limit, argv[0] searched on the PATH of its own environment). It is a
//    vfork-style child (clone with CLONE_VM | CLONE_VFORK): it runs on the parent's memory, with every
//    handler of the parent's reset, until it executes, while the calling thread waits; so the parent's
//    page tables are not copied and it takes no copy-on-write faults afterwards. A failed exec comes
//    back through that shared memory.
//  - posix_spawnp: no code of hvrun's runs in the child (glibc runs it on the parent's memory until it
//    executes), so a process with many threads and a large heap does not pay for copying its page
//    tables; a failed exec comes back as posix_spawnp's result.
// Either way every child starts with no blocked signals and SIGPIPE, SIGINT, SIGTERM and SIGHUP at
// their defaults (hvrun and the agent ignore or catch them), and has no descriptor of hvrun's beyond
// its 0, 1 and 2: every other one is made close-on-exec in the child (close_range, or closefrom with
// posix_spawnp), whether or not it was opened so (Asio's sockets are not).
#include <sys/resource.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/exit_status.hpp"
#include "common/unique_fd.hpp"

namespace hvrun {

// A null-terminated array of pointers into strings that outlive it: argv or envp for exec.
class CStringArray {
 public:
  explicit CStringArray(const std::vector<std::string>& strings);
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<char*> pointers_;
};

// One of a child's standard streams (0, 1 or 2).
struct ChildStream {
  enum class Kind { kInherit, kDevNull, kFd, kPipe };
  Kind kind = Kind::kInherit;
  int fd = -1;               // kFd: the descriptor the child gets (the caller keeps and closes its own)
  const char* what = "";     // kPipe: names the pipe in the message of a failed pipe2

  static ChildStream inherit() { return {}; }
  static ChildStream dev_null() { return {Kind::kDevNull, -1, ""}; }
  static ChildStream of_fd(int fd) { return {Kind::kFd, fd, ""}; }
  // A new pipe; the child gets one end, the Child handle the other (Child::take_stream).
  static ChildStream pipe(const char* what) { return {Kind::kPipe, -1, what}; }
};

enum class StartBy { kFork, kSpawn };

struct ChildSpec {
  std::vector<std::string> argv{};
  // The program executed, searched on PATH when it has no '/'; empty: argv[0].
  std::string program{};
  // "NAME=value"; none: this process's environment. Given, its PATH is the one argv[0] is searched on
  // (kFork only).
  std::optional<std::vector<std::string>> env{};
  std::string cwd{};  // the child's working directory; empty: this process's (kFork only)
  std::array<ChildStream, 3> stdio{};
  // Its own process group (setpgid, from both sides, so a signal sent right after the start reaches
  // it): a terminal's Ctrl-C reaches only hvrun, and Child::signal reaches the child's descendants.
  bool own_group = false;
  // Sent to the child when the thread that started it ends (PR_SET_PDEATHSIG); the child exits at
  // once, unstarted, when the parent is already gone. 0: none (kFork only).
  int death_signal = 0;
  std::optional<rlimit> open_files{};  // RLIMIT_NOFILE set in the child before it executes (kFork only)
  StartBy start_by = StartBy::kFork;
  std::string what{};  // names the child in the messages of failed calls: "fork: starting WHAT"
};

// A child that could not be started. The message is the one users see; callers that word their own
// (naming the host or the flag) take step() and error_number().
class SpawnError : public Error {
 public:
  enum class Step { kChdir, kSetup, kExec };
  using Error::Error;
  SpawnError(const std::string& message, Step step, int err) : Error(message), step_(step), err_(err) {}
  Step step() const noexcept { return step_; }
  int error_number() const noexcept { return err_; }

 private:
  Step step_ = Step::kExec;
  int err_ = 0;
};

// What a child wrote on its stdout and stderr pipes (Child::read_outputs).
struct ChildOutput {
  std::string out, err;
};

class Child {
 public:
  Child() = default;
  // Starts the child and returns once it has executed its program. Throws SpawnError when it could
  // not (the failed child already reaped): "cannot execute 'PROGRAM': REASON", "cannot enter working
  // directory 'DIR': REASON", "cannot set up the standard streams (or close the other descriptors) of
  // 'PROGRAM': REASON"; SystemError
  // when a call of the parent's fails (pipe2, fork, posix_spawn set-up).
  static Child start(const ChildSpec& spec);
  // A child still running is killed with SIGKILL (its whole group when it leads one) and reaped.
  ~Child();
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }  // -1 when the handle owns no child (none started, moved, let go or released)
  // The parent's end of the pipe on the child's stream `n` (0, 1 or 2); empty if it is no pipe or taken.
  UniqueFd take_stream(int n);

  // Reaps the child if it has ended, without waiting; the status once it has. Throws SystemError
  // when wait4 fails (the child reaped by someone else); the handle then owns no child.
  std::optional<ExitStatus> try_wait();
  // Waits for the child to end (EINTR retried); throws as try_wait.
  ExitStatus wait();
  // Waits at most `timeout` (polling, from 1 ms up to 50 ms apart); none if it still runs then. The
  // waits are for a handle that owns a child (a broken invariant otherwise).
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // What wait4 said of the reaped child's resources (ru_maxrss: its peak resident set, in KiB); zero
  // before it is reaped.
  const rusage& usage() const { return usage_; }
  // A descriptor that turns readable when the child ends (pidfd_open), for an event loop to wait on;
  // empty on kernels before 5.3 (ENOSYS), where the owner looks again with try_wait. The pid is the
  // handle's until it is reaped, so the descriptor cannot name another process.
  UniqueFd end_descriptor() const;
  // Sends `sig` to the child, or to its group when it leads one; one that is gone is not an error.
  void signal(int sig);
  // For an owner that must not wait for a child that may take long to die (a process in uninterruptible
  // sleep ignores SIGKILL until it wakes): SIGKILL, then the child is reaped if it has ended already;
  // else the handle lets it go without waiting, to reap_unowned_children, or to init once this
  // process has exited. Never throws.
  void kill_without_waiting() noexcept;
  // The child is no longer this handle's: the caller reaps it by its pid. Nothing of hvrun's lets a
  // child go so (a test does); in a subreaper, reap_unowned_children would take it once it has ended.
  pid_t release();

  // Reads the stdout and stderr pipes (those not taken) until both end, keeping the last `limit` bytes
  // of each; none if they have not ended within `timeout`.
  std::optional<ChildOutput> read_outputs(std::chrono::milliseconds timeout, std::size_t limit);

 private:
  bool reap(int options);
  void kill_and_reap() noexcept;
  void disown() noexcept;
  [[noreturn]] void lost();
  pid_t pid_ = -1;
  bool leads_group_ = false;
  std::string what_;
  std::array<UniqueFd, 3> streams_;
  std::optional<ExitStatus> status_;
  rusage usage_{};
};

// Reaps each of `children` (this process's children, e.g. from /proc; stale ones are harmless) that has
// ended and that no Child handle owns: what a subreaper (PR_SET_CHILD_SUBREAPER) adopted when a process
// under it lost its parent, and what kill_without_waiting let go. Waits for nothing; a start running
// on another thread is waited for, so that its child, not yet known to its handle, is not taken.
// Returns how many were reaped.
std::size_t reap_unowned_children(const std::vector<pid_t>& children);

// Sends `sig` to the process group led by `pgid`; a group that no longer exists is not an error.
void signal_group(pid_t pgid, int sig);

}  // namespace hvrun

#include "launcher/start/command_agent.hpp"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/rank_process.hpp"
#include "agent/wire/duration_text.hpp"
#include "agent/wire/error.hpp"
#include "agent/wire/log.hpp"
#include "launcher/base/io_thread.hpp"
#include "launcher/base/open_files_limit.hpp"

extern char** environ;

namespace hvrun {

namespace {

constexpr std::size_t kStderrTailBytes = 4096;
// After the channel closes the agent exits and so does the command; these bound a command that does not.
constexpr std::chrono::milliseconds kExitWait{2000};
constexpr std::chrono::milliseconds kTermWait{1000};
// The command has ended; what it wrote is in the pipe, unless a descendant still holds the pipe open.
constexpr std::chrono::milliseconds kStderrEndWait{1000};

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto nl = text.find_last_of("\r\n");
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace

std::unique_ptr<CommandAgent> CommandAgent::start(const CommandAgentOptions& o) {
  if (o.argv.empty()) throw Error(o.host + ": no command to start the agent with");
  auto [ours, theirs] = make_socketpair("channel to the agent command");
  Pipe err = make_pipe("stderr of the agent command");
  // With the user's own open files limit, which the command's descendants (the agent, the ranks) keep.
  const std::vector<std::string> command = with_original_open_files_limit(o.argv);
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::unique_ptr<CommandAgent> agent(new CommandAgent(o.label));
  // posix_spawnp, not fork: this runs on a connection thread while others run, and a fork copies the
  // page tables of the whole process (which grows with the hosts) under its mm lock, then makes every
  // other thread's next write a copy-on-write fault until the exec (issue 14: 13 ms of system time per
  // host at 1000 hosts, 1.6 ms at 32). glibc's posix_spawn runs the child on the parent's memory
  // (CLONE_VFORK) until it executes. The child: the channel as stdin and stdout, the stderr pipe as
  // stderr (dup2 clears their close-on-exec; every other descriptor of hvrun is close-on-exec), its own
  // process group (Ctrl-C reaches only hvrun), no blocked signals, default SIGPIPE (hvrun ignores it)
  // and default handlers for the signals hvrun catches. No PR_SET_PDEATHSIG and no check that hvrun is
  // still alive, as the forked child had (detach_child): the death signal fires when the spawning
  // *thread* ends (srun took that SIGTERM for a cancel); and when hvrun dies, even before the spawn
  // returns, its end of the channel closes with it: the command's stdin ends, and so does the agent.
  const std::string context = o.label + " for " + o.host;
  posix_spawn_file_actions_t actions;
  if (const int rc = ::posix_spawn_file_actions_init(&actions); rc != 0)
    throw SystemError("posix_spawn_file_actions_init", context, rc);
  struct ActionsFree {
    posix_spawn_file_actions_t* a;
    ~ActionsFree() { ::posix_spawn_file_actions_destroy(a); }
  } actions_free{&actions};
  for (const int rc : {::posix_spawn_file_actions_adddup2(&actions, theirs.get(), 0),
                       ::posix_spawn_file_actions_adddup2(&actions, theirs.get(), 1),
                       ::posix_spawn_file_actions_adddup2(&actions, err.write.get(), 2)}) {
    if (rc != 0) throw SystemError("posix_spawn_file_actions_adddup2", context, rc);
  }
  posix_spawnattr_t attr;
  if (const int rc = ::posix_spawnattr_init(&attr); rc != 0) throw SystemError("posix_spawnattr_init", context, rc);
  struct AttrFree {
    posix_spawnattr_t* a;
    ~AttrFree() { ::posix_spawnattr_destroy(a); }
  } attr_free{&attr};
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (const int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, s);
  for (const int rc : {::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                            POSIX_SPAWN_SETSIGDEF),
                       ::posix_spawnattr_setpgroup(&attr, 0), ::posix_spawnattr_setsigmask(&attr, &none),
                       ::posix_spawnattr_setsigdefault(&attr, &defaults)}) {
    if (rc != 0) throw SystemError("posix_spawnattr_set*", context, rc);
  }
  pid_t pid = -1;
  if (const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ); rc != 0) {
    // glibc reports a failed exec here (the child ran on our memory); there is no exit code 127 to read.
    throw Error(o.host + ": cannot start " + o.label + ": posix_spawnp '" + command[0] + "': " + std::strerror(rc) +
                (rc == ENOENT ? " (command not found?)" : "") + "; " + o.fix);
  }
  agent->pid_ = pid;
  theirs.reset();
  err.write.reset();
  agent->channel_ = std::move(ours);
  agent->keep_stderr(std::move(err.read));

  // The agent's hello is its first bytes; peek, so the job's channel reads them itself.
  pollfd p{agent->channel_.get(), POLLIN, 0};
  const int n = retry_eintr([&] { return ::poll(&p, 1, static_cast<int>(o.start_timeout.count())); });
  if (n < 0) throw_errno("poll", "waiting for the agent on " + o.host);
  if (n == 0)
    throw TimeoutError(o.host + ": the agent started by " + o.label + " said nothing within " +
                       seconds_text(o.start_timeout) + "; raise --start-timeout if the host is only slow, or " +
                       o.fix);
  char c;
  if (retry_eintr([&] { return ::recv(agent->channel_.get(), &c, 1, MSG_PEEK); }) > 0) return agent;

  agent->channel_.reset();
  const bool ended = agent->wait_exit(kExitWait);
  agent->wait_stderr_end(kStderrEndWait);
  const std::string said = last_line(agent->stderr_tail());
  throw Error(o.host + ": " + o.label + (ended ? " " + agent->exit_text() : std::string(" closed its output")) +
              " before hvrun-agent said hello" + (said.empty() ? std::string() : " (it wrote: " + said + ")") +
              "; " + o.fix);
}

// Reads the command's stderr into the agent's tail, one chunk per wake-up of the I/O thread, until EOF.
// A descendant of the command that keeps the pipe open keeps it watched until the agent goes.
class CommandAgent::StderrDrain final : public IoClient {
 public:
  StderrDrain(CommandAgent& owner, UniqueFd fd) : owner_(owner), fd_(std::move(fd)), io_(IoThread::get()) {
    io_->attach(*this);
  }
  ~StderrDrain() override { io_->detach(*this); }
  StderrDrain(const StderrDrain&) = delete;
  StderrDrain& operator=(const StderrDrain&) = delete;

  IoWant service() override {
    char buf[4096];
    const ssize_t got = retry_eintr([&] { return ::read(fd_.get(), buf, sizeof buf); });
    if (got == 0 || (got < 0 && errno != EAGAIN)) return {.done = true};
    if (got > 0) {
      std::lock_guard lock(owner_.tail_mutex_);
      owner_.tail_.append(buf, static_cast<std::size_t>(got));
      if (owner_.tail_.size() > kStderrTailBytes) owner_.tail_.erase(0, owner_.tail_.size() - kStderrTailBytes);
    }
    IoWant want;
    want.fd[0] = fd_.get();
    want.events[0] = POLLIN;
    return want;
  }

  void finish(const std::string& failure) override {
    if (!failure.empty()) log_of(LogSubsys::kStart).debug("stderr of the agent command: {}", failure);
    {
      std::lock_guard lock(owner_.tail_mutex_);
      owner_.stderr_ended_ = true;
    }
    owner_.stderr_end_.notify_all();
  }

 private:
  CommandAgent& owner_;
  UniqueFd fd_;  // the pipe's read end, non-blocking
  std::shared_ptr<IoThread> io_;  // last: attached after the members above exist
};

CommandAgent::CommandAgent(std::string description) : description_(std::move(description)) {}

void CommandAgent::keep_stderr(UniqueFd err) {
  set_nonblocking(err.get(), "stderr of the agent command");
  drain_ = std::make_unique<StderrDrain>(*this, std::move(err));
}

void CommandAgent::wait_stderr_end(std::chrono::milliseconds timeout) {
  std::unique_lock lock(tail_mutex_);
  stderr_end_.wait_for(lock, timeout, [this] { return stderr_ended_; });
}

std::string CommandAgent::stderr_tail() const {
  std::lock_guard lock(tail_mutex_);
  return tail_;
}

bool CommandAgent::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ < 0) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    const pid_t r = retry_eintr([&] { return ::waitpid(pid_, &status_, WNOHANG); });
    if (r == pid_ || r < 0) {
      pid_ = -1;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
  }
}

std::string CommandAgent::exit_text() const {
  if (WIFSIGNALED(status_)) return "was killed by " + signal_name(WTERMSIG(status_));
  const int code = WEXITSTATUS(status_);
  return "exited with code " + std::to_string(code) + (code == 127 ? " (command not found?)" : "");
}

CommandAgent::~CommandAgent() {
  channel_.reset();
  if (pid_ > 0) {
    const pid_t group = pid_;
    if (!wait_exit(kExitWait)) {
      signal_group(group, SIGTERM);
      if (!wait_exit(kTermWait)) {
        signal_group(group, SIGKILL);
        retry_eintr([&] { return ::waitpid(pid_, &status_, 0); });
        pid_ = -1;
      }
    }
  }
  drain_.reset();
}

}  // namespace hvrun

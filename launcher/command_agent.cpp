#include "launcher/command_agent.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/wire/duration_text.hpp"
#include "agent/wire/error.hpp"
#include "agent/rank_process.hpp"

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
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::unique_ptr<CommandAgent> agent(new CommandAgent(o.label));
  agent->stop_ = make_pipe("stop pipe of the agent command's stderr reader");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork", "starting " + o.label + " for " + o.host);
  if (pid == 0) {
    // No PR_SET_PDEATHSIG: it fires when the forking *thread* ends, and this runs on a connection
    // thread that ends as soon as the agent is up (srun took that SIGTERM for a cancel). When hvrun
    // dies its end of the channel closes with it: the command's stdin ends, and so does the agent.
    if (!detach_child(0, parent)) ::_exit(1);
    if (::dup2(theirs.get(), 0) < 0 || ::dup2(theirs.get(), 1) < 0 || ::dup2(err.write.get(), 2) < 0) ::_exit(1);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
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

void CommandAgent::keep_stderr(UniqueFd err) {
  reader_ = std::thread([this, fd = std::move(err)] {
    char buf[4096];
    for (;;) {
      pollfd p[2] = {{fd.get(), POLLIN, 0}, {stop_.read.get(), POLLIN, 0}};
      if (retry_eintr([&] { return ::poll(p, 2, -1); }) < 0 || p[1].revents != 0) break;
      const ssize_t got = retry_eintr([&] { return ::read(fd.get(), buf, sizeof buf); });
      if (got <= 0) break;
      std::lock_guard lock(tail_mutex_);
      tail_.append(buf, static_cast<std::size_t>(got));
      if (tail_.size() > kStderrTailBytes) tail_.erase(0, tail_.size() - kStderrTailBytes);
    }
    {
      std::lock_guard lock(tail_mutex_);
      stderr_ended_ = true;
    }
    stderr_end_.notify_all();
  });
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
  if (reader_.joinable()) {
    const char wake = 1;
    if (::write(stop_.write.get(), &wake, 1) < 0) {
      // The pipe is ours and empty; a failed write leaves the reader to end at the stderr pipe's EOF.
    }
    reader_.join();
  }
}

}  // namespace hvrun

#include "launcher/start/command_agent.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/base/io_thread.hpp"
#include "common/open_files_limit.hpp"
#include "launcher/start/agent_check.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kStderrTailBytes = 4096;
// After the channel closes the agent exits and so does the command; these bound a command that does not.
constexpr std::chrono::milliseconds kExitWait{2000};
constexpr std::chrono::milliseconds kTermWait{1000};
// The command has ended; what it wrote is in the pipe, unless a descendant still holds the pipe open.
constexpr std::chrono::milliseconds kStderrEndWait{1000};

// "exited with code 127 (command not found?)", "was killed by SIGTERM".
std::string exit_text(const ExitStatus& status) {
  return status.text() + (status.signal == 0 && status.code == 127 ? " (command not found?)" : "");
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto nl = text.find_last_of("\r\n");
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace

std::unique_ptr<CommandAgent> CommandAgent::start(const CommandAgentOptions& o) {
  if (o.argv.empty()) throw Error(o.host + ": no command to start the agent with");
  auto [ours, theirs] = make_socketpair("channel to the agent command");
  // With the user's own open files limit, which the command's descendants (the agent, the ranks) keep.
  const std::vector<std::string> command = with_original_open_files_limit(o.argv);

  std::unique_ptr<CommandAgent> agent(new CommandAgent(o.label));
  // posix_spawnp, not fork: this runs on a connection thread while others run, and a fork copies the
  // page tables of the whole process (which grows with the hosts) under its mm lock, then makes every
  // other thread's next write a copy-on-write fault until the exec (13 ms of system time per host at
  // 1000 hosts). The channel is the command's stdin and stdout, the stderr pipe its stderr; its own
  // process group (Ctrl-C reaches only hvrun). No PR_SET_PDEATHSIG: it fires when the spawning
  // *thread* ends (srun takes that SIGTERM for a cancel); when hvrun dies, even before the spawn
  // returns, its end of the channel closes with it: the command's stdin ends, and so does the agent.
  ChildSpec spec{.argv = command,
                 .stdio = {ChildStream::of_fd(theirs.get()), ChildStream::of_fd(theirs.get()),
                           ChildStream::pipe("stderr of the agent command")},
                 .own_group = true,
                 .start_by = StartBy::kSpawn,
                 .what = o.label + " for " + o.host};
  try {
    agent->child_ = Child::start(spec);
  } catch (const SpawnError& e) {
    const int rc = e.error_number();
    throw Error(o.host + ": cannot start " + o.label + ": posix_spawnp '" + command[0] + "': " + std::strerror(rc) +
                (rc == ENOENT ? " (command not found?)" : "") + "; " + o.fix);
  }
  theirs.reset();
  agent->channel_ = std::move(ours);
  agent->keep_stderr(agent->child_.take_stream(2));

  // The shell reads the script and nothing else: hvrun sends nothing more until the agent's hello. The
  // script fits a socket buffer; a command that already ended shows up below as the end of the channel.
  if (!o.stdin_script.empty()) {
    const ssize_t sent = retry_eintr(
        [&] { return ::send(agent->channel_.get(), o.stdin_script.data(), o.stdin_script.size(), MSG_NOSIGNAL); });
    if (sent < 0 && errno != EPIPE && errno != ECONNRESET) throw_errno("send", "check script for " + o.host);
  }

  const AgentCheckReport report = read_agent_check(agent->channel_.get(), o.start_timeout, o.host);
  if (report.end == AgentCheckReport::End::kTimeout)
    throw TimeoutError(o.host + ": the agent started by " + o.label + " said nothing within " +
                       seconds_text(o.start_timeout) + "; raise --start-timeout if the host is only slow, or " +
                       o.fix);
  const std::string differs = findings_text(report.findings, o.digest);
  if (report.end == AgentCheckReport::End::kHello) {
    if (!differs.empty())
      log_of(LogSubsys::kStart)
          .warn("{}: {}; running {} instead, which passed the same check; install this hvrun's build there or "
                "remove it to silence this",
                o.host, differs, report.ran());
    return agent;
  }

  agent->channel_.reset();
  const std::optional<ExitStatus> ended = agent->child_.wait_for(kExitWait);
  agent->wait_stderr_end(kStderrEndWait);
  if (report.none()) {
    if (differs.empty()) throw Error(o.host + ": " + o.missing + " (" + o.label + "); " + o.fix);
    throw Error(o.host + ": refusing to run hvrun-agent there: " + differs + "; " + o.label +
                " cannot copy hvrun's own agent to the host as hvrun's SSH does: install this hvrun's build there "
                "(the same hvrun-agent file), or give --agent-path a path where it is");
  }
  const std::string said = last_line(agent->stderr_tail());
  throw Error(o.host + ": " + o.label + (ended ? " " + exit_text(*ended) : std::string(" closed its output")) +
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
      owner_.tail_.append(std::string_view(buf, static_cast<std::size_t>(got)));
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

CommandAgent::CommandAgent(std::string description)
    : description_(std::move(description)), tail_(kStderrTailBytes) {}

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
  return tail_.text();
}

CommandAgent::~CommandAgent() {
  channel_.reset();
  if (child_.pid() > 0) {
    try {
      if (!child_.wait_for(kExitWait)) {
        child_.signal(SIGTERM);
        if (!child_.wait_for(kTermWait)) child_.signal(SIGKILL);  // child_ reaps it
      }
    } catch (const Error& e) {
      spdlog::debug("stopping {}: {}", description_, e.what());
    }
  }
  child_ = Child();  // reaped before the drain goes
  drain_.reset();
}

}  // namespace hvrun

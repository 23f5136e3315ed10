#include "launcher/start/local_agent.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "agent/rank_process.hpp"
#include "agent/wire/error.hpp"
#include "launcher/base/open_files_limit.hpp"

namespace hvrun {

std::string default_agent_path() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw SystemError("readlink", "/proc/self/exe", ec.value());
  return (self.parent_path() / "hvrun-agent").string();
}

LocalAgent::LocalAgent(const std::string& agent_path) {
  if (::access(agent_path.c_str(), X_OK) != 0)
    throw_errno("access", "agent '" + agent_path + "' (install hvrun-agent beside hvrun)");
  auto [ours, theirs] = make_socketpair("channel to the local agent");
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw_errno("fork", "starting the local agent");
  if (pid_ == 0) {
    // SIGTERM, not SIGKILL, when hvrun dies: the agent must live long enough to kill its ranks.
    if (!detach_child(SIGTERM, parent)) ::_exit(1);
    restore_open_files_limit_in_child();
    if (::dup2(theirs.get(), 0) < 0 || ::dup2(theirs.get(), 1) < 0) ::_exit(1);
    ::execl(agent_path.c_str(), "hvrun-agent", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  channel_ = std::move(ours);
}

int LocalAgent::reap(std::chrono::milliseconds timeout) {
  if (pid_ < 0) return 0;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // The agent exits right after its channel closes; this wait is normally over at the first check.
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    const pid_t r = retry_eintr([&] { return ::waitpid(pid_, &status, WNOHANG); });
    if (r == pid_ || r < 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      retry_eintr([&] { return ::waitpid(pid_, &status, 0); });
      break;
    }
    std::this_thread::sleep_for(pause);
  }
  pid_ = -1;
  return status;
}

LocalAgent::~LocalAgent() { reap(std::chrono::milliseconds(0)); }

}  // namespace hvrun

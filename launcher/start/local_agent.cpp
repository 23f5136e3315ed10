#include "launcher/start/local_agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "common/error.hpp"
#include "common/open_files_limit.hpp"

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
  ChildSpec spec{.argv = {"hvrun-agent"},
                 .program = agent_path,
                 .stdio = {ChildStream::of_fd(theirs.get()), ChildStream::of_fd(theirs.get()), ChildStream::inherit()},
                 .own_group = true,
                 // SIGTERM, not SIGKILL, when hvrun dies: the agent must live long enough to kill its ranks.
                 .death_signal = SIGTERM,
                 .open_files = open_files_limit_for_children(),
                 .start_by = StartBy::kFork,
                 .what = "the local agent"};
  try {
    child_ = Child::start(spec);
  } catch (const SpawnError& e) {
    throw Error(std::string(e.what()) + " (install hvrun-agent beside hvrun)");
  }
  channel_ = std::move(ours);
}

int LocalAgent::reap(std::chrono::milliseconds timeout) {
  // The agent exits right after its channel closes; this wait is normally over at the first check.
  if (auto status = child_.wait_for(timeout)) return status->code;
  child_.signal(SIGKILL);
  return child_.wait().code;
}

}  // namespace hvrun

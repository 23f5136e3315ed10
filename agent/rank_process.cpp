#include "agent/rank_process.hpp"

#include <signal.h>

#include <cerrno>

#include "common/open_files_limit.hpp"

namespace hvrun {

namespace {

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

}  // namespace

RankProcess spawn_rank(const RankSpawnSpec& spec) {
  if (spec.argv.empty()) throw SpawnError("no command to execute");
  ChildSpec child{.argv = spec.argv,
                  .env = spec.env,
                  .cwd = spec.cwd,
                  .stdio = {ChildStream::dev_null(), ChildStream::pipe("stdout of a rank"),
                            ChildStream::pipe("stderr of a rank")},
                  .own_group = true,
                  .death_signal = SIGKILL,  // when the agent dies, even by SIGKILL
                  // The soft open files limit the agent was started with: the user's, not the raised one.
                  .open_files = open_files_limit_for_children(),
                  .start_by = StartBy::kFork,
                  .what = spec.argv[0]};
  Child started;
  try {
    started = Child::start(child);
  } catch (const SpawnError& e) {
    if (e.step() != SpawnError::Step::kExec) throw;
    throw SpawnError(std::string(e.what()) + exec_fix(spec.argv[0], e.error_number()), e.step(), e.error_number());
  }
  UniqueFd out = started.take_stream(1);
  UniqueFd err = started.take_stream(2);
  return RankProcess{std::move(started), std::move(out), std::move(err)};
}

}  // namespace hvrun

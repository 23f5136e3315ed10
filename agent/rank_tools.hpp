#pragma once
// What the agent adds to its ranks so that their crashes and hangs can be explained: a private
// directory (mkdtemp, mode 0700, under base_directory()) holding libhvrun_crash.so, written out from the
// copy built into the agent, and the folder where the ranks write the stacks hvrun asks for
// (common/crash_report.hpp). Removed, with what is in it, when the agent ends; a directory whose
// agent was killed is removed by the next agent of the same user on that host (its lock file's flock
// died with the agent).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace hvrun {

class RankTools {
 public:
  // Throws Error naming the call and the path when the directory or the library cannot be written.
  RankTools();
  // The tools, or none where they cannot be made; either way the user is warned, naming this host (a
  // refused TMPDIR, or ranks without the crash handler: no native stacks, no hang autopsy).
  static std::unique_ptr<RankTools> create_or_warn();
  ~RankTools();
  RankTools(const RankTools&) = delete;
  RankTools& operator=(const RankTools&) = delete;

  // Where the directory is made: $TMPDIR when set and tmpdir_refusal() has nothing to say; else
  // /dev/shm when it is a tmpfs this user can write, that passes the same check, and the ranks can map
  // a library from (not noexec); else /tmp. Orphans are swept there only.
  static std::string base_directory();
  // Why $TMPDIR is not used ("" when it is, or unset): the library every rank preloads is made there, so
  // a TMPDIR another user owns or can write in (common/checked_directory.hpp's rule) could swap it; the
  // directory is hvrun's own, so it goes to the default place instead, and the agent warns.
  static std::string tmpdir_refusal();

  const std::string& library() const { return library_; }
  const std::string& stack_dir() const { return stack_dir_; }

  // `env` ("NAME=value", a rank's whole environment) with the library preloaded (before the user's
  // LD_PRELOAD) and HVRUN_STACK_DIR set; unchanged when the user set HVRUN_CRASH_HANDLER=0.
  std::vector<std::string> equip(std::vector<std::string> env) const;

 private:
  void create_in(const std::string& tmp);  // throws Error; leaves nothing behind when it does

  std::string dir_, library_, stack_dir_;
  UniqueFd lock_;  // flock held for the agent's life: the directory's owner is alive
};

}  // namespace hvrun

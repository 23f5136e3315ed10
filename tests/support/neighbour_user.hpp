#pragma once
// Test support: a second, unprivileged Unix user on this machine, the neighbour on a shared cluster.
// The test that makes one owns it: the destructor kills the user's processes and removes the user,
// whatever the test's outcome. Needs root (useradd); callers skip without it.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"

namespace hvrun::test {

class NeighbourUser {
 public:
  // Creates user "hvnb-<tag>" (no home, no login shell), first removing a leftover of that name from a
  // run that was killed. `tag` keeps two test runs on one machine apart (pass the lab prefix).
  explicit NeighbourUser(const std::string& tag);
  ~NeighbourUser();
  NeighbourUser(const NeighbourUser&) = delete;
  NeighbourUser& operator=(const NeighbourUser&) = delete;

  const std::string& name() const { return name_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  // Runs argv as this user (setpriv: its uid, gid and no supplementary groups; argv[0] is looked up on
  // PATH), to completion.
  ChildResult run(const std::vector<std::string>& argv,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  // Makes `path` (and, with `recursive`, what is below it) this user's.
  void give(const std::string& path, bool recursive = false) const;

 private:
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

}  // namespace hvrun::test

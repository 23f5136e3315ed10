#pragma once
// The pids that Child handles own (common/child_process.hpp), so that a sweep for the children no
// handle owns (reap_unowned_children: what a subreaper adopts) never takes a handle's exit status.
// One list per process; every member may be called from any thread.
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <vector>

namespace hvrun {

class OwnedChildren {
 public:
  static OwnedChildren& get();

  // Held by a start from before its child exists until add(): a sweep waits for it, so a child that
  // ends before its handle knows its pid is not taken. Starts do not wait for one another.
  std::shared_lock<std::shared_mutex> starting() { return std::shared_lock(starting_); }
  void add(pid_t pid);
  // wait4(pid, options) under the list's lock, so `options` holds WNOHANG (a handle that waits does so
  // with waitid's WNOWAIT first, holding nothing); a pid reaped (or no longer a child: -1, errno kept)
  // is struck out before the lock is let go, so a new child that takes the freed pid at once is listed
  // after, not before. Returns wait4's result.
  pid_t reap(pid_t pid, int* wait_status, int options, rusage* usage);
  // The handle lets `pid` go unreaped: a sweep may take it.
  void remove(pid_t pid);
  // Reaps each of `children` that has ended and is not listed; waits for nothing. Returns how many.
  std::size_t reap_unowned(const std::vector<pid_t>& children);

 private:
  OwnedChildren() = default;
  std::shared_mutex starting_;
  std::mutex mu_;  // guards pids_
  std::set<pid_t> pids_;
};

}  // namespace hvrun

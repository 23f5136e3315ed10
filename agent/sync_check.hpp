#pragma once
// The agent's half of --sync: which of the launcher's files this host lacks or holds with other
// contents. It runs on a thread of its own (SyncChecker), so a large directory being hashed does not
// hold up the probes and heartbeats the agent answers meanwhile.
#include <functional>
#include <stop_token>
#include <thread>
#include <vector>

#include "common/control_message.hpp"

namespace hvrun {

// The indexes of `files` that are missing here, not regular files, of another size or SHA-256, or
// unreadable (a copy will replace them); ascending. A file whose size differs is not hashed. Stops early,
// returning what it has, when `stop` is requested. Throws ProtocolError for a path that is not absolute
// or has a ".." component: the launcher sends only paths under the directories it was given.
std::vector<int> files_to_sync(const std::vector<SyncFile>& files, std::stop_token stop = {});

// One check at a time on its own thread; `done` runs on that thread (post it to the event loop). The
// destructor stops the check and joins the thread.
class SyncChecker {
 public:
  using Done = std::function<void(std::vector<int> need)>;
  SyncChecker() = default;
  SyncChecker(const SyncChecker&) = delete;
  SyncChecker& operator=(const SyncChecker&) = delete;

  // Validates the paths at once (ProtocolError), then checks on the thread. A second check while one
  // runs is a ProtocolError.
  void start(std::vector<SyncFile> files, Done done);

 private:
  std::jthread thread_;
};

}  // namespace hvrun

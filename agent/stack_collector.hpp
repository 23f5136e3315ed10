#pragma once
// The stacks of this host's ranks, for hvrun's hang autopsy: every process of each rank's group is
// asked for its stack (SIGURG with crash_report::kStackRequest, to its main thread; the preloaded
// libhvrun_crash.so writes a stack file and the process goes on; its frames are named here, FrameNames),
// and what has not answered by the deadline is described from /proc (state, wchan, kernel stack). One
// collection at a time.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/control_message.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class StackCollector {
 public:
  struct Rank {
    int rank = 0;
    pid_t pid = 0;  // also its process group
  };

  // `stack_dir`: where the library writes (RankTools::stack_dir()); empty when nothing was preloaded,
  // and then every process is described from /proc at once.
  StackCollector(boost::asio::io_context& io, std::string stack_dir);
  ~StackCollector();
  StackCollector(const StackCollector&) = delete;
  StackCollector& operator=(const StackCollector&) = delete;

  // Calls `done` once, from the io_context, within `timeout` (and at once when every process has
  // answered). A call while a collection runs is ignored.
  void collect(const std::vector<Rank>& ranks, std::chrono::milliseconds timeout,
               std::function<void(StacksMsg)> done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

#pragma once
// The hang autopsy's report: every rank's stacks (StacksMsg, common/crash_report.hpp's texts),
// grouped by where each rank's main thread is, so that 64 ranks waiting in one allreduce read as one
// line and the rank stuck elsewhere stands out:
//   hvrun: ranks 0,1,3 on lab0, lab1: in synchronize at mpi_ops.py:1003 ← step at train.py:41 ← ...
//   hvrun:     File ".../train.py", line 41 in step   (the whole stack of the group's first rank)
//   hvrun: rank 2 on lab1: in wait_for_shard at train.py:19 ← <module> at train.py:44
// Python frames where the rank runs Python, else its native frames, else what the kernel says it
// waits in. Pure: the job (job.cpp) collects, this words.
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun {

struct RankStackText {
  int rank = 0;
  std::string host;
  std::string text;
};

// One frame of the place a rank is in, innermost first.
struct StackPlace {
  std::vector<std::string> frames;  // "wait_for_shard at train.py:19", "futex_wait", "kernel: futex_wait_queue"
  std::vector<std::string> lines;   // the stack as the rank wrote it (the main thread's part)
};

// The main thread's place in `text` (the group leader's section).
StackPlace stack_place(const std::string& text);

// The report, each line with hvrun's prefix: groups by place, the largest first, at most
// `max_groups` (then a line counting the rest), each with at most `max_lines` of its stack.
std::string stack_groups_report(const std::vector<RankStackText>& stacks, std::size_t max_groups = 8,
                                std::size_t max_lines = 12);

// "0-3,5,7": ranks, sorted, runs of three or more as ranges.
std::string rank_list(std::vector<int> ranks);

}  // namespace hvrun

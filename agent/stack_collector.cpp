#include "agent/stack_collector.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <filesystem>

#include "agent/frame_names.hpp"
#include "agent/proc_scan.hpp"
#include "agent/where_sampler.hpp"
#include "common/crash_report.hpp"
#include "common/file_digest.hpp"

namespace hvrun {

namespace {

constexpr std::chrono::milliseconds kPollInterval{20};
// A process that has not answered is asked again this often: one that was between exec and the
// library's constructor when first asked ignored that SIGURG (its default), and a second answer only
// rewrites the same file.
constexpr int kPollsPerRequest = 5;
// A stack file is bounded: a process with thousands of threads must not fill the launcher's memory.
constexpr std::size_t kMaxStackBytes = 64 * 1024;

std::string read_bounded(const std::string& path) {
  std::string text = read_file_head(path, kMaxStackBytes);
  if (text.size() == kMaxStackBytes) text += "\n  ... (cut at 64 KiB)\n";
  return text;
}

}  // namespace

struct StackCollector::Impl {
  struct Process {
    std::size_t rank_index = 0;
    pid_t pid = 0;
    std::string comm;
    std::string file;  // where its answer appears
    std::string text;  // its answer, once there
  };

  Impl(boost::asio::io_context& io, std::string dir) : timer(io), stack_dir(std::move(dir)) {}

  boost::asio::steady_timer timer;
  std::string stack_dir;
  bool running = false;
  std::vector<Rank> ranks;
  std::vector<Process> processes;
  std::chrono::steady_clock::time_point deadline;
  std::function<void(StacksMsg)> done;
  int polls = 0;
  std::unique_ptr<FrameNames> names;  // during a collection: the files its frames lie in

  void start(const std::vector<Rank>& r, std::chrono::milliseconds timeout, std::function<void(StacksMsg)> d) {
    if (running) return;
    running = true;
    ranks = r;
    done = std::move(d);
    processes.clear();
    names = std::make_unique<FrameNames>();
    std::vector<pid_t> groups;
    for (const Rank& k : ranks) groups.push_back(k.pid);
    const auto members = processes_in_groups(groups);
    for (std::size_t i = 0; i < ranks.size(); ++i)
      for (const ProcStat& p : members[i]) {
        if (p.state == 'Z') continue;
        Process proc{i, p.pid, p.comm, {}, {}};
        if (!stack_dir.empty()) {
          proc.file = stack_dir + "/" + std::to_string(ranks[i].pid) + "-" + std::to_string(p.pid) + ".stack";
          if (!ask_main_thread(p.pid, crash_report::kStackRequest)) proc.file.clear();
        }
        processes.push_back(std::move(proc));
      }
    deadline = std::chrono::steady_clock::now() + timeout;
    polls = 0;
    poll();
  }

  void poll() {
    bool waiting = false;
    for (Process& p : processes) {
      if (p.file.empty() || !p.text.empty()) continue;
      std::error_code ec;
      if (std::filesystem::exists(p.file, ec)) {
        p.text = names->name_text(read_bounded(p.file));
        std::filesystem::remove(p.file, ec);
      } else {
        waiting = true;
        if (polls > 0 && polls % kPollsPerRequest == 0) ask_main_thread(p.pid, crash_report::kStackRequest);
      }
    }
    if (!waiting || std::chrono::steady_clock::now() >= deadline) return finish();
    ++polls;
    timer.expires_after(kPollInterval);
    timer.async_wait([this](auto ec) {
      if (!ec) poll();
    });
  }

  void finish() {
    StacksMsg msg;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      RankStack s{ranks[i].rank, {}};
      for (const Process& p : processes) {
        if (p.rank_index != i) continue;
        if (!p.text.empty()) {
          s.text += p.text;
          if (s.text.back() != '\n') s.text += '\n';
          continue;
        }
        s.text += std::string(crash_report::kStackHeader) + " pid " + std::to_string(p.pid) + " (" + p.comm +
                  ") gave no stack (it does not run hvrun's crash handler, or did not answer in time); "
                  "the kernel says:\n" +
                  kernel_wait_text(p.pid);
      }
      if (s.text.empty()) s.text = std::string(crash_report::kStackHeader) + " no process left in the rank's group\n";
      msg.ranks.push_back(std::move(s));
    }
    // Late answers are not read; their files go with the directory.
    running = false;
    names.reset();
    auto d = std::move(done);
    d(std::move(msg));
  }
};

StackCollector::StackCollector(boost::asio::io_context& io, std::string stack_dir)
    : impl_(std::make_unique<Impl>(io, std::move(stack_dir))) {}
StackCollector::~StackCollector() = default;

void StackCollector::collect(const std::vector<Rank>& ranks, std::chrono::milliseconds timeout,
                             std::function<void(StacksMsg)> done) {
  impl_->start(ranks, timeout, std::move(done));
}

}  // namespace hvrun

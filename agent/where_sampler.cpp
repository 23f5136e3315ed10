#include "agent/where_sampler.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/crash_report.hpp"
#include "common/file_digest.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kMaxAnswerBytes = 4096;  // 64 frames of 19 characters fit

}  // namespace

bool is_communication_library(std::string_view path) {
  const auto slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  static constexpr std::array<std::string_view, 17> kPrefixes{
      "libmpi",  "libopen-pal", "libopen-rte", "mca_",    "libmca_", "libucp",  "libuct",    "libucs",
      "libucm",  "libfabric",   "libpsm",      "libgloo", "libnccl", "libhcoll", "libhvrun_collectives",
      "libibverbs", "libmlx5"};
  if (std::any_of(kPrefixes.begin(), kPrefixes.end(), [&](std::string_view p) { return base.starts_with(p); }))
    return true;
  // Horovod's modules (horovod/torch/mpi_lib_v2.cpython-*.so, horovod/common/...): a rank's main thread
  // is there while it enqueues an operation or waits for one.
  return path.find("/horovod/") != std::string_view::npos && base.find(".so") != std::string_view::npos;
}

WhereSampler::WhereSampler(pid_t pid, std::string stack_dir)
    : pid_(pid),
      answer_path_(stack_dir.empty() ? std::string()
                                     : stack_dir + "/" + std::to_string(pid) + crash_report::kWhereSuffix) {}

WhereSampler::~WhereSampler() {
  if (!answer_path_.empty()) ::unlink(answer_path_.c_str());
}

bool ask_main_thread(pid_t pid, int request) {
  siginfo_t info{};
  info.si_signo = SIGURG;
  info.si_code = SI_QUEUE;
  info.si_pid = ::getpid();
  info.si_uid = ::getuid();
  info.si_value.sival_int = request;
  return ::syscall(SYS_rt_tgsigqueueinfo, pid, pid, SIGURG, &info) == 0;
}

void WhereSampler::ask() {
  if (answer_path_.empty() || (!answered_ever_ && unanswered_ >= kUnansweredLimit)) return;
  // A rank gone meanwhile (ESRCH) is the observer's to notice.
  if (ask_main_thread(pid_, crash_report::kWhereRequest)) ++unanswered_;
}

std::optional<bool> WhereSampler::answer() {
  if (answer_path_.empty()) return std::nullopt;
  const std::string text = read_file_head(answer_path_, kMaxAnswerBytes);
  if (text.empty()) return std::nullopt;
  ::unlink(answer_path_.c_str());
  answered_ever_ = true;
  unanswered_ = 0;
  std::vector<std::uintptr_t> frames;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    unsigned long long addr = 0;
    if (std::sscanf(word.c_str(), "%llx", &addr) == 1 && addr != 0) frames.push_back(static_cast<std::uintptr_t>(addr));
  }
  bool reread = false;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    // A return address may be one past its call's function: the byte before it is the call.
    const std::uintptr_t addr = i == 0 ? frames[i] : frames[i] - 1;
    const Mapping* m = mapping_of(addr);
    if (m == nullptr && !reread) {  // a library loaded since the maps were read
      read_maps();
      reread = true;
      m = mapping_of(addr);
    }
    if (m != nullptr && m->communication) return true;
  }
  return false;
}

void WhereSampler::read_maps() {
  maps_.clear();
  std::ifstream in("/proc/" + std::to_string(pid_) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    // "START-END PERMS OFFSET DEV INODE PATH"
    unsigned long long start = 0, end = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perms, &path_at) < 3) continue;
    if (perms[2] != 'x' || path_at <= 0 || static_cast<std::size_t>(path_at) >= line.size() || line[path_at] != '/')
      continue;
    maps_.push_back(Mapping{static_cast<std::uintptr_t>(start), static_cast<std::uintptr_t>(end),
                            is_communication_library(std::string_view(line).substr(static_cast<std::size_t>(path_at)))});
  }
}

const WhereSampler::Mapping* WhereSampler::mapping_of(std::uintptr_t addr) const {
  for (const Mapping& m : maps_)
    if (addr >= m.start && addr < m.end) return &m;
  return nullptr;
}

}  // namespace hvrun

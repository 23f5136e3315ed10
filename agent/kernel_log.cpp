#include "agent/kernel_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/crash_report.hpp"
#include "common/error.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kMaxKept = 256;
constexpr const char kKilledProcess[] = "Killed process ";

}  // namespace

KernelLog::KernelLog() : fd_(::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
  if (fd_ && ::lseek(fd_.get(), 0, SEEK_END) < 0) fd_.reset();
}

void KernelLog::read_new() {
  if (!fd_) return;
  // One record per read; EAGAIN: no more. EPIPE: records were overwritten meanwhile, go on.
  char record[8192];
  for (;;) {
    const ssize_t n = retry_eintr([&] { return ::read(fd_.get(), record, sizeof record - 1); });
    if (n < 0 && errno == EPIPE) continue;
    if (n <= 0) return;
    const std::string text(record, static_cast<std::size_t>(n));
    // "PRIO,SEQ,USEC,FLAGS;MESSAGE\n"
    const auto semi = text.find(';');
    if (semi == std::string::npos) continue;
    std::string message = text.substr(semi + 1);
    if (const auto nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
    const auto at = message.find(kKilledProcess);
    if (at == std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(message.c_str() + at + sizeof kKilledProcess - 1));
    if (pid <= 0) continue;
    if (killed_.size() >= kMaxKept) killed_.erase(killed_.begin());
    killed_[pid] = message;
  }
}

std::optional<std::string> KernelLog::oom_kill_of(pid_t pid) {
  read_new();
  const auto it = killed_.find(pid);
  if (it == killed_.end()) return std::nullopt;
  return it->second;
}

namespace {

std::optional<long> oom_kill_field(const std::string& path) {
  std::ifstream in(path);
  for (std::string key; in >> key;) {
    long value = 0;
    if (!(in >> value)) return std::nullopt;
    if (key == "oom_kill") return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<CgroupOomCount> own_cgroup_oom_kills() {
  std::ifstream in("/proc/self/cgroup");
  std::string v2, v1;
  // "0::/path" (v2), "4:memory:/path" (v1's memory hierarchy)
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
    const auto m = line.find(":memory:");
    if (m != std::string::npos) v1 = line.substr(m + 8);
  }
  if (!v2.empty())
    if (const auto n = oom_kill_field("/sys/fs/cgroup" + (v2 == "/" ? std::string() : v2) + "/memory.events"))
      return CgroupOomCount{v2, *n};
  if (!v1.empty())
    if (const auto n = oom_kill_field("/sys/fs/cgroup/memory" + (v1 == "/" ? std::string() : v1) + "/memory.oom_control"))
      return CgroupOomCount{v1, *n};
  return std::nullopt;
}

std::string oom_kill_words(const std::string& record) {
  std::string words = std::string(crash_report::kOomKillCause).substr(8);  // without "sent by "
  std::string details;
  if (record.find("Memory cgroup out of memory") != std::string::npos) details = "its memory cgroup's limit was reached";
  const auto rss = record.find("anon-rss:");
  if (rss != std::string::npos) {
    const auto end = record.find(',', rss);
    if (!details.empty()) details += "; ";
    details += "anon-rss " + record.substr(rss + 9, end == std::string::npos ? std::string::npos : end - rss - 9);
  }
  return details.empty() ? words : words + " (" + details + ")";
}

}  // namespace hvrun

#include "agent/kernel_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "agent/wire/crash_report.hpp"
#include "agent/wire/error.hpp"

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

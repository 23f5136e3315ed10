#include "agent/proc_scan.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "common/file_digest.hpp"

namespace hvrun {

namespace {

// A /proc file read with one open and as few reads as it takes (the whole-/proc passes read thousands
// of them); empty when the file is gone or unreadable.
std::string read_proc_file(const std::string& path) { return read_file_head(path, SIZE_MAX); }

// The numbers in a whitespace-separated list ("123 456 ").
std::vector<pid_t> pid_list(const std::string& text) {
  std::vector<pid_t> out;
  const char* p = text.c_str();
  for (;;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) return out;
    if (v > 0) out.push_back(static_cast<pid_t>(v));
    p = end;
  }
}

// Every thread's children of `pid`: /proc/PID/task/TID/children. A child is listed under the thread that
// forked it, or under the thread group leader once it was reparented to the process (a subreaper).
std::vector<pid_t> listed_children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(tasks.c_str());
  if (d == nullptr) return out;  // gone
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    for (const pid_t child : pid_list(read_proc_file(tasks + "/" + e->d_name + "/children"))) out.push_back(child);
  }
  ::closedir(d);
  return out;
}

// Whether this kernel lists a task's children (CONFIG_PROC_CHILDREN, on in Debian's and most distributions'
// kernels); without it, finding descendants takes a pass over every process.
bool kernel_lists_children() {
  static const bool listed = ::access(("/proc/self/task/" + std::to_string(::gettid()) + "/children").c_str(), R_OK) == 0;
  return listed;
}

long ticks_per_second() {
  static const long hz = [] {
    const long v = ::sysconf(_SC_CLK_TCK);
    return v > 0 ? v : 100;
  }();
  return hz;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) out.push_back(static_cast<pid_t>(v));
  }
  ::closedir(d);
  return out;
}

}  // namespace

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  const std::string text = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  // "PID (COMM) S PPID PGRP ..." where COMM may hold spaces and parentheses: it ends at the last ')'.
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat s;
  s.pid = pid;
  s.comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; rest >> w;) f.push_back(w);
  // f[0] is field 3 (state); pgrp is field 5, utime 14, stime 15.
  if (f.size() < 13) return std::nullopt;
  s.state = f[0].empty() ? '?' : f[0][0];
  s.ppid = static_cast<pid_t>(std::atol(f[1].c_str()));
  s.pgrp = static_cast<pid_t>(std::atol(f[2].c_str()));
  const long long ticks = std::atoll(f[11].c_str()) + std::atoll(f[12].c_str());
  s.cpu_ms = ticks * 1000 / ticks_per_second();
  return s;
}

std::vector<std::vector<ProcStat>> processes_in_groups(const std::vector<pid_t>& groups) {
  std::map<pid_t, std::size_t> index;
  for (std::size_t i = 0; i < groups.size(); ++i) index[groups[i]] = i;
  std::vector<std::vector<ProcStat>> out(groups.size());
  for (const pid_t pid : all_pids()) {
    const auto s = read_proc_stat(pid);
    if (!s) continue;
    const auto it = index.find(s->pgrp);
    if (it != index.end()) out[it->second].push_back(*s);
  }
  for (std::size_t i = 0; i < groups.size(); ++i)
    std::stable_sort(out[i].begin(), out[i].end(), [leader = groups[i]](const ProcStat& a, const ProcStat& b) {
      return (a.pid == leader) > (b.pid == leader) || ((a.pid == leader) == (b.pid == leader) && a.pid < b.pid);
    });
  return out;
}

std::vector<ProcStat> processes_in_group(pid_t pgrp) { return processes_in_groups({pgrp}).front(); }

std::vector<pid_t> children_of(pid_t parent) {
  if (kernel_lists_children()) return listed_children_of(parent);
  std::vector<pid_t> out;
  for (const pid_t pid : all_pids())
    if (const auto s = read_proc_stat(pid); s && s->ppid == parent) out.push_back(pid);
  return out;
}

std::vector<pid_t> living_descendants_of(pid_t ancestor, DescendantWalk walk) {
  // A parent's children with their state: from its children files (only the tree under `ancestor` is
  // read, so a host's other processes cost nothing), or from one pass over every process.
  std::function<std::vector<ProcStat>(pid_t)> children;
  std::multimap<pid_t, ProcStat> by_parent;
  if (walk == DescendantWalk::kChildrenFiles && kernel_lists_children()) {
    children = [](pid_t parent) {
      std::vector<ProcStat> out;
      for (const pid_t child : listed_children_of(parent))
        if (const auto s = read_proc_stat(child)) out.push_back(*s);  // else gone since it was listed
      return out;
    };
  } else {
    for (const pid_t pid : all_pids())
      if (const auto s = read_proc_stat(pid)) by_parent.emplace(s->ppid, *s);
    children = [&by_parent](pid_t parent) {
      std::vector<ProcStat> out;
      const auto [first, last] = by_parent.equal_range(parent);
      for (auto it = first; it != last; ++it) out.push_back(it->second);
      return out;
    };
  }
  std::vector<pid_t> out;
  std::vector<pid_t> parents{ancestor};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    for (const ProcStat& child : children(parent)) {
      parents.push_back(child.pid);
      if (child.state != 'Z') out.push_back(child.pid);
    }
  }
  return out;
}

std::string kernel_wait_text(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  const auto s = read_proc_stat(pid);
  std::string text = "  state " + std::string(1, s ? s->state : '?');
  std::string wchan = read_proc_file(base + "/wchan");
  if (!wchan.empty() && wchan != "0") text += ", waiting in " + wchan;
  text += "\n";
  const std::string stack = read_proc_file(base + "/stack");
  std::istringstream lines(stack);
  for (std::string line; std::getline(lines, line);) {
    // "[<0>] futex_wait_queue+0x60/0x90": the address in brackets says nothing without root's kallsyms.
    const auto sp = line.find("] ");
    text += "  kernel: " + (sp == std::string::npos ? line : line.substr(sp + 2)) + "\n";
  }
  return text;
}

}  // namespace hvrun

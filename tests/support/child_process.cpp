#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace hvrun::test {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<std::string> env;
  // An extra "NAME=value" replaces NAME from this environment: appended beside it, getenv would
  // still find the first one (a child given HOME=... would keep root's HOME).
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const bool replaced = std::any_of(extra_env.begin(), extra_env.end(),
                                      [&](const std::string& x) { return name_of(x) == name_of(entry); });
    if (!replaced) env.push_back(entry);
  }
  for (const auto& e : extra_env) env.push_back(e);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  started_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void ChildProcess::pump(int timeout_ms) {
  pollfd fds[2] = {{stdout_held_ ? -1 : out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (::poll(fds, 2, timeout_ms) <= 0) return;
  char buf[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].revents == 0) continue;
    int& fd = i == 0 ? out_fd_ : err_fd_;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    } else {
      ::close(fd);
      fd = -1;
    }
  }
}

bool ChildProcess::wait_for_stdout(const std::string& needle, int count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int found = 0;
    for (std::size_t pos = out_.find(needle); pos != std::string::npos; pos = out_.find(needle, pos + 1)) ++found;
    if (found >= count) return true;
    if (std::chrono::steady_clock::now() >= deadline || (out_fd_ < 0 && err_fd_ < 0)) return false;
    pump(50);
  }
}

void ChildProcess::pump_for(std::chrono::milliseconds duration) {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline) {
    if (out_fd_ < 0 && err_fd_ < 0) {
      std::this_thread::sleep_until(deadline);
      return;
    }
    pump(20);
  }
}

ChildResult ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ChildResult r;
  int status = 0;
  bool killed = false;
  rusage usage{};
  stdout_held_ = false;
  for (;;) {
    if (out_fd_ >= 0 || err_fd_ >= 0) pump(20);
    const pid_t w = ::wait4(pid_, &status, WNOHANG, &usage);
    if (w == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::wait4(pid_, &status, 0, &usage);
      killed = true;
      break;
    }
    if (out_fd_ < 0 && err_fd_ < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
  // Whatever is still in the pipes (descendants may hold them open: read briefly, not forever).
  for (int i = 0; i < 10 && (out_fd_ >= 0 || err_fd_ >= 0); ++i) pump(10);
  if (killed)
    r.exit_code = -1;
  else if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else
    r.exit_code = 128 + WTERMSIG(status);
  r.out = out_;
  r.err = err_;
  r.max_rss_kib = usage.ru_maxrss;
  return r;
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

ChildResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                const std::vector<std::string>& extra_env) {
  ChildProcess p(argv, extra_env);
  return p.wait(timeout);
}

bool is_zombie_or_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close_paren = line.rfind(')');  // the command name may hold spaces and parentheses
  return close_paren == std::string::npos || close_paren + 2 >= line.size() || line[close_paren + 2] == 'Z';
}

std::vector<pid_t> processes_with_marker(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return found;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    if (is_zombie_or_gone(pid)) continue;
    std::ifstream env("/proc/" + std::string(e->d_name) + "/environ", std::ios::binary);
    std::stringstream ss;
    ss << env.rdbuf();
    const std::string all = ss.str();
    std::size_t start = 0;
    while (start < all.size()) {
      std::size_t end = all.find('\0', start);
      if (end == std::string::npos) end = all.size();
      if (all.compare(start, end - start, marker) == 0) {
        found.push_back(pid);
        break;
      }
      start = end + 1;
    }
  }
  ::closedir(d);
  return found;
}

std::vector<pid_t> wait_until_gone(const std::string& marker, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = processes_with_marker(marker);
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::size_t wait_for_marker_count(const std::string& marker, std::size_t count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::size_t n = processes_with_marker(marker).size();
    if (n >= count || std::chrono::steady_clock::now() >= deadline) return n;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string unique_marker() {
  static int counter = 0;
  std::random_device rd;
  return "HVRUN_TEST_MARKER=" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" +
         std::to_string(rd());
}

std::string hvrun_bin() { return std::string(build().bin_dir) + "/hvrun"; }
std::string source_dir() { return build().source_dir; }

}  // namespace hvrun::test

#pragma once
// Test support: a program run with hvrun's crash handler preloaded (stack files to the tools' folder),
// leading a process group of its own as a rank does, its stdout and stderr read here; killed at the
// end if still there.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "agent/rank_tools.hpp"
#include "common/unique_fd.hpp"

namespace hvrun::test {

struct PreloadedProcess {
  pid_t pid = -1;
  hvrun::UniqueFd out, err;
  std::string out_text, err_text;

  PreloadedProcess(const std::vector<std::string>& argv, const hvrun::RankTools& tools) {
    std::vector<std::string> env{"LD_PRELOAD=" + tools.library(), "HVRUN_STACK_DIR=" + tools.stack_dir()};
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("LD_PRELOAD=", 0) != 0) env.emplace_back(*e);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr);
    envp.push_back(nullptr);
    int o[2], e[2];
    REQUIRE(::pipe2(o, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(e, O_CLOEXEC) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(o[1], 1);
      ::dup2(e[1], 2);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    ::close(o[1]);
    ::close(e[1]);
    out = hvrun::UniqueFd(o[0]);
    err = hvrun::UniqueFd(e[0]);
  }
  ~PreloadedProcess() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }

  // Reads both pipes until stdout holds `needle` (true) or both end or the timeout passes (false).
  bool read_until(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (needle.empty() || out_text.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || (!out && !err)) return false;
      pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
      if (::poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        char buf[4096];
        const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n > 0) (i == 0 ? out_text : err_text).append(buf, static_cast<std::size_t>(n));
        else (i == 0 ? out : err) = hvrun::UniqueFd();
      }
    }
    return true;
  }
  int wait_status() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
};

}  // namespace hvrun::test

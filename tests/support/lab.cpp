#include "tests/support/lab.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "tests/support/child_process.hpp"

namespace hvrun::test {

namespace {
using namespace std::chrono_literals;

std::string lab_script() { return source_dir() + "/scripts/lab.sh"; }

std::vector<std::string> lab_env(const std::string& prefix) {
  return {"LAB_PREFIX=" + prefix, "LAB_DIR=/tmp/" + prefix};
}

std::runtime_error system_error(const std::string& call, const std::string& what) {
  return std::runtime_error(call + " (" + what + "): " + std::strerror(errno));
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The reaper, in a forked child of a process that may have threads: async-signal-safe calls only.
// It waits on `pipe_fd` for the lab's owner: a byte says the lab is down, EOF that the owner died
// without taking it down, and then it runs `down` itself. Its own session keeps it out of signals
// sent to the test's process group; /dev/null for its streams keeps ctest from waiting on it; it holds
// `lock_fd` (the prefix's lock) until the lab is gone.
[[noreturn]] void reap(int pipe_fd, int lock_fd, int null_fd, char* const* down_argv, char* const* down_env) {
  ::setsid();
  for (int n = 0; n < 3; ++n) ::dup2(null_fd, n);
  const int pipe_high = ::fcntl(pipe_fd, F_DUPFD, 10);
  const int lock_high = ::fcntl(lock_fd, F_DUPFD, 10);
  if (pipe_high < 0 || lock_high < 0 || ::dup2(pipe_high, 3) != 3 || ::dup2(lock_high, 4) != 4) ::_exit(1);
  ::close_range(5, ~0U, 0);  // nothing else of the test's (its children's pipes) stays open here
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
  ::fcntl(4, F_SETFD, FD_CLOEXEC);
  char byte;
  ssize_t n;
  while ((n = ::read(3, &byte, 1)) < 0 && errno == EINTR) {
  }
  if (n == 1) ::_exit(0);
  const pid_t down = ::fork();
  if (down == 0) {
    ::execve(down_argv[0], down_argv, down_env);
    ::_exit(127);
  }
  if (down > 0)
    while (::waitpid(down, nullptr, 0) < 0 && errno == EINTR) {
    }
  ::_exit(0);
}
}  // namespace

void Lab::guard() {
  // Where lock files are kept (/run/lock; /tmp where there is none): the file stays, the lock goes.
  const std::string lock_dir = std::filesystem::is_directory("/run/lock") ? "/run/lock" : "/tmp";
  const std::string lock_path = lock_dir + "/hvrun-lab-" + prefix_ + ".lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) throw system_error("open", lock_path);
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) throw system_error("flock", lock_path);
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("lab '" + prefix_ + "' is still held after 2 minutes by another test or by the reaper of "
                               "a test that died (" + lock_path + ")");
    ::usleep(100'000);
  }
  std::vector<std::string> argv{lab_script(), "down"};
  std::vector<std::string> env = lab_env(prefix_);
  env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  const std::vector<char*> c_argv = c_strings(argv), c_env = c_strings(env);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw system_error("pipe2", "the lab reaper's pipe");
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) {
    const auto e = system_error("open", "/dev/null");
    ::close(fds[0]);
    ::close(fds[1]);
    throw e;
  }
  // Two forks: the reaper is no child of the test, whose checks for leftover descendants it would fail.
  const pid_t middle = ::fork();
  if (middle == 0) {
    if (::fork() == 0) reap(fds[0], lock_fd_, null_fd, c_argv.data(), c_env.data());
    ::_exit(0);
  }
  const int fork_errno = errno;
  ::close(fds[0]);
  ::close(null_fd);
  if (middle < 0) {
    ::close(fds[1]);
    errno = fork_errno;
    throw system_error("fork", "the lab reaper");
  }
  while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  reaper_fd_ = fds[1];
}

void Lab::release() noexcept {
  if (reaper_fd_ >= 0) {
    const char down = 'd';
    (void)!::write(reaper_fd_, &down, 1);
    ::close(reaper_fd_);
    reaper_fd_ = -1;
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

std::string Lab::default_prefix() {
  const char* prefix = std::getenv("HVRUN_TEST_LAB_PREFIX");
  return prefix && *prefix ? prefix : "hvtest";
}

std::optional<std::string> Lab::unavailable_reason() {
  if (::geteuid() != 0) return "skipped: lab tests need root (network namespaces, sshd); CI runs them as root";
  if (!std::filesystem::exists("/usr/sbin/sshd")) return "skipped: lab tests need /usr/sbin/sshd (openssh-server)";
  auto r = run({"/usr/bin/env", "ip", "netns", "list"}, 10s);
  if (r.exit_code != 0) return "skipped: `ip netns` does not work here: " + r.err;
  return std::nullopt;
}

Lab::Lab(int hosts, std::string prefix, std::vector<std::string> options) : prefix_(std::move(prefix)) {
  try {
    guard();
    bring_up(hosts, options);
  } catch (...) {
    if (reaper_fd_ >= 0) {
      try {
        run({lab_script(), "down"}, 60s, lab_env(prefix_));
      } catch (...) {
      }
    }
    release();  // the reaper exits: the lab is down
    throw;
  }
}

void Lab::bring_up(int hosts, const std::vector<std::string>& options) {
  auto up = run({lab_script(), "up", std::to_string(hosts)}, 120s, [&] {
    auto e = lab_env(prefix_);
    e.push_back("LAB_RECREATE=1");
    e.insert(e.end(), options.begin(), options.end());
    return e;
  }());
  if (up.exit_code != 0) throw std::runtime_error("lab.sh up failed:\n" + up.out + up.err);
  auto env = run({lab_script(), "env"}, 30s, lab_env(prefix_));
  std::istringstream lines(env.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("export ", 0) != 0) continue;
    const auto eq = line.find('=');
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') value = value.substr(1, value.size() - 2);
    vars_[line.substr(7, eq - 7)] = value;
  }
}

Lab::~Lab() {
  run({lab_script(), "down"}, 60s, lab_env(prefix_));
  release();
}

const std::string& Lab::var(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) throw std::runtime_error("lab.sh env has no " + name);
  return it->second;
}

std::vector<std::string> Lab::list(const std::string& name) const {
  std::vector<std::string> out;
  std::istringstream words(var(name));
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> Lab::on_host(int i, const std::vector<std::string>& cmd) const {
  std::vector<std::string> argv{"/usr/bin/env", "LAB_PREFIX=" + prefix_, "LAB_DIR=/tmp/" + prefix_, lab_script(),
                                "exec", std::to_string(i)};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

int Lab::control(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{lab_script()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, 60s, lab_env(prefix_)).exit_code;
}

std::vector<int> Lab::processes_on_host(int i, const std::string& marker) const {
  auto pids = run({"/usr/bin/env", "ip", "netns", "pids", prefix_ + "-h" + std::to_string(i)}, 10s);
  std::vector<int> out;
  std::istringstream words(pids.out);
  const auto marked = processes_with_marker(marker);
  for (int pid; words >> pid;)
    for (pid_t m : marked)
      if (m == pid) out.push_back(pid);
  return out;
}

}  // namespace hvrun::test

#pragma once
// A throw-away sshd for integration tests: its own host key, client key pair, authorized_keys and
// config in a temporary directory, listening on 127.0.0.1 at a free port, killed (with every
// per-connection child) and reaped when the fixture goes. HOME points into the temporary directory
// for the fixture's lifetime, and SSH_AUTH_SOCK is unset, so the real ~/.ssh and agent are never used.
// Needs root (sshd's privilege separation) and /usr/sbin/sshd; ssh_tests_can_run() says whether.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "launcher/ssh/ssh_session.hpp"

extern char** environ;

namespace hvrun::testing {

inline constexpr const char* kSshd = "/usr/sbin/sshd";

inline bool ssh_tests_can_run() { return ::geteuid() == 0 && ::access(kSshd, X_OK) == 0; }

// Sets (or unsets, with nullopt) an environment variable; restores the old value on destruction.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hvrun-ssh-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs a program to completion (output discarded); throws if it fails.
inline void run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawnp " + argv[0] + " failed");
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(argv[0] + " failed");
}

inline void make_key(const std::filesystem::path& path) {
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".pub");
  run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hvrun-test", "-f", path.string()});
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `text` to `path`, making its missing parent directories.
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// A port on 127.0.0.1 that nothing listens on right now.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Every process below `root` (sshd puts each connection in its own session, so a process-group
// kill does not reach them).
inline std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  if (DIR* proc = ::opendir("/proc")) {
    while (dirent* entry = ::readdir(proc)) {
      pid_t pid = std::atoi(entry->d_name);
      if (pid <= 0) continue;
      std::string stat = read_text("/proc/" + std::string(entry->d_name) + "/stat");
      auto close_paren = stat.rfind(')');
      if (close_paren == std::string::npos) continue;
      std::istringstream rest(stat.substr(close_paren + 2));
      char state;
      pid_t ppid = 0;
      rest >> state >> ppid;
      parent_of.emplace_back(pid, ppid);
    }
    ::closedir(proc);
  }
  std::vector<pid_t> found{root};
  for (std::size_t i = 0; i < found.size(); ++i) {
    for (auto [pid, ppid] : parent_of) {
      if (ppid == found[i]) found.push_back(pid);
    }
  }
  found.erase(found.begin());
  return found;
}

// `sshd -D -f CONFIG` as a child; stopped (with every descendant) and reaped on destruction.
class SshdProcess {
 public:
  SshdProcess(const std::filesystem::path& config, const std::filesystem::path& log, int port) {
    std::string config_text = config.string(), log_text = log.string();
    std::filesystem::remove(log);  // -E appends: a restart must not find the last run's "listening"
    const char* argv[] = {kSshd, "-D", "-f", config_text.c_str(), "-E", log_text.c_str(), nullptr};
    // fork+exec rather than posix_spawn for PR_SET_PDEATHSIG: if the test process dies without
    // running destructors (a crash, SIGKILL), sshd dies with it. The child calls only
    // async-signal-safe functions.
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == -1) throw std::runtime_error("fork for sshd failed");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      int null = ::open("/dev/null", O_RDWR);  // sshd logs to -E; stray complaints go nowhere
      for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
      ::execv(kSshd, const_cast<char**>(argv));
      ::_exit(127);
    }
    // Ready when it says so (LogLevel VERBOSE); probing the port would leave a connection behind.
    const std::string ready = "Server listening on 127.0.0.1 port " + std::to_string(port) + ".";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read_text(log).find(ready) == std::string::npos) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("sshd exited at start: " + read_text(log));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("sshd does not listen on port " + std::to_string(port) + ": " + read_text(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~SshdProcess() { stop(); }
  SshdProcess(const SshdProcess&) = delete;
  SshdProcess& operator=(const SshdProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Sends `signal` to every process serving a connection (not the listener).
  void signal_connections(int signal) const {
    for (pid_t pid : descendants(pid_)) ::kill(pid, signal);
  }

  // Freezes the listener (no new connections forked), kills everything below it, then it.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP);
    for (pid_t pid : descendants(pid_)) ::kill(pid, SIGKILL);
    ::kill(-pid_, SIGKILL);
    int status;
    while (::waitpid(pid_, &status, 0) == -1 && errno == EINTR) {
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

class SshdFixture {
 public:
  SshdFixture()
      : home_env_("HOME", (dir_.path() / "home").string()), agent_env_("SSH_AUTH_SOCK", std::nullopt) {
    namespace fs = std::filesystem;
    fs::create_directories(dir_.path() / "home");
    fs::create_directories(dir_.path() / "server");
    fs::create_directories(dir_.path() / "keys");
    ::mkdir("/run/sshd", 0755);  // sshd's privilege separation directory (Debian makes it at boot)
    make_key(host_key());
    make_key(client_key());
    write_text(dir_.path() / "server" / "authorized_keys", read_text(client_key().string() + ".pub"));
    port_ = free_port();
    std::ostringstream config;
    config << "Port " << port_ << "\n"
           << "ListenAddress 127.0.0.1\n"
           << "HostKey " << host_key().string() << "\n"
           << "PidFile " << (dir_.path() / "server" / "sshd.pid").string() << "\n"
           << "AuthorizedKeysFile " << (dir_.path() / "server" / "authorized_keys").string() << "\n"
           << "PasswordAuthentication no\n"
           << "KbdInteractiveAuthentication no\n"
           << "UsePAM no\n"
           << "StrictModes no\n"  // the files sit under /tmp, which is group/world-writable
           << "PermitRootLogin prohibit-password\n"
           << "Subsystem sftp internal-sftp\n"
           << "MaxStartups 64\n"
           << "LogLevel VERBOSE\n"
           // Remote commands see the test HOME too: bash sources ~/.bashrc when started by sshd, and
           // the real one (root's) is neither the test's business nor fast.
           << "SetEnv HOME=" << home().string() << "\n";
    write_text(dir_.path() / "server" / "sshd_config", config.str());
    start();
  }

  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path home() const { return dir_.path() / "home"; }
  std::filesystem::path ssh_dir() const { return home() / ".ssh"; }
  std::filesystem::path known_hosts() const { return ssh_dir() / "known_hosts"; }
  std::filesystem::path host_key() const { return dir_.path() / "server" / "ssh_host_ed25519_key"; }
  std::filesystem::path client_key() const { return dir_.path() / "keys" / "client"; }
  std::filesystem::path log() const { return dir_.path() / "server" / "sshd.log"; }
  int port() const { return port_; }
  SshdProcess& sshd() { return *sshd_; }

  SshTarget target() const {
    SshTarget target;
    target.host = "127.0.0.1";
    target.port = port_;
    target.identity_file = client_key().string();
    target.connect_timeout = std::chrono::seconds(5);
    return target;
  }

  // A new host key, as after a reinstall (or a man in the middle).
  void restart_with_new_host_key() {
    sshd_.reset();
    make_key(host_key());
    start();
  }

 private:
  void start() {
    sshd_.emplace(dir_.path() / "server" / "sshd_config", log(), port_);
  }

  TempDir dir_;
  ScopedEnv home_env_;
  ScopedEnv agent_env_;
  int port_ = 0;
  std::optional<SshdProcess> sshd_;  // last: stopped first
};

}  // namespace hvrun::testing

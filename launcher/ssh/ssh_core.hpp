#pragma once
// Internal to the SSH layer (ssh_session.cpp, ssh_exec.cpp); it brings libssh's types in, so nothing
// else includes it. The connection both SshSession and SshExec use, the lock every libssh call on it
// holds, the wake-ups between threads that wait on it, and channels running a command.
#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launcher/ssh/ssh_session.hpp"
#include "common/unique_fd.hpp"

namespace hvrun::ssh_detail {

using Clock = std::chrono::steady_clock;

// ssh_options_set, or SshError kConfig "cannot apply WHAT (ssh_options_set: ...)".
class Core;
void set_option(Core& core, ssh_options_e type, const void* value, const std::string& what);

// Calls ssh_init() once per process (and routes libssh's log to spdlog).
void init_libssh();

// One libssh session. Shared (shared_ptr) by the SshSession and every SshExec made from it, so the
// connection outlives the last user. libssh sessions are not thread-safe: every call on session()
// happens under `mu` (use SessionLock).
class Core {
 public:
  explicit Core(std::string host);
  ~Core();  // disconnects (without waiting on a dead peer)
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  ssh_session session() const { return session_; }

  // Who this is, for messages; filled in by connect().
  const std::string host;  // as the user wrote it
  std::string hostname;    // after the config's HostName
  int port = 22;
  std::string user;
  std::string known_hosts;
  std::chrono::milliseconds keepalive_interval{5'000};
  int keepalive_count_max = 3;

  // "HOST: what" as an SshError of the given class.
  SshError error(SshFailure failure, const std::string& what) const;
  // ssh_get_error() for this session; call under the lock.
  std::string libssh_error() const;

  std::mutex mu;
  // Everything below is guarded by mu.
  ssh_counter_struct socket_counter{};  // bytes through the TCP socket (libssh's "scounter")
  ssh_counter_struct packet_counter{};  // SSH packets (libssh's "rcounter")
  Clock::time_point last_received;      // when the socket last delivered a byte
  std::vector<int> waiters;             // eventfds of threads polling this connection (Waiter)
  std::string lost;                     // why the connection is presumed dead; empty while alive

  // Throws SshError kConnectionLost if the connection was declared dead; call under the lock.
  void throw_if_lost() const;

 private:
  ssh_session session_ = nullptr;
  ssh_callbacks_struct callbacks_{};
};

// Holds Core::mu for one stretch of libssh calls. With `nonblocking`, libssh calls return at once
// instead of waiting (the session is blocking again on release). On release, if libssh took packets
// off the socket meanwhile, every other Waiter is woken: the packets may be for its channel, and
// they no longer make the socket readable.
class SessionLock {
 public:
  SessionLock(Core& core, bool nonblocking, int own_waiter_fd = -1);
  // Takes the lock only if it is free at once (the SSH pump must not wait behind an upload); the
  // rest applies only if owns_lock().
  SessionLock(Core& core, bool nonblocking, int own_waiter_fd, std::try_to_lock_t);
  ~SessionLock();
  bool owns_lock() const { return lock_.owns_lock(); }
  SessionLock(const SessionLock&) = delete;
  SessionLock& operator=(const SessionLock&) = delete;

 private:
  Core& core_;
  std::unique_lock<std::mutex> lock_;
  int own_waiter_fd_;
  std::uint64_t packets_before_ = 0;
  std::uint64_t bytes_before_ = 0;
};

// An eventfd registered with a Core, polled beside the session socket by a thread that waits for
// packets (an exec pump, run()). SessionLock and stop requests write to it.
class Waiter {
 public:
  explicit Waiter(Core& core);
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  int fd() const { return fd_.get(); }
  void notify() const;  // async-signal-safe write(2); any thread
  void drain() const;

 private:
  Core& core_;
  UniqueFd fd_;
};

// A session channel running one command. Exit status and signal are recorded by libssh callbacks,
// whichever thread holds the lock when they arrive.
class Channel {
 public:
  // Opens the channel and starts `command` (blocking libssh calls, bounded by the session timeout).
  // Throws SshError kChannel (or kConnectionLost).
  static std::unique_ptr<Channel> exec(Core& core, const std::string& command);
  ~Channel();  // closes and frees under the lock, without waiting on the peer
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  ssh_channel get() const { return channel_; }

  bool exited() const;  // an exit-status or exit-signal arrived
  std::optional<int> exit_status() const;
  std::string exit_signal() const;

 private:
  explicit Channel(Core& core);
  static void on_exit_status(ssh_session, ssh_channel, int status, void* self);
  static void on_exit_signal(ssh_session, ssh_channel, const char* signal, int core_dumped,
                             const char* errmsg, const char* lang, void* self);

  Core& core_;
  ssh_channel channel_ = nullptr;
  ssh_channel_callbacks_struct callbacks_{};
  mutable std::mutex mu_;
  std::optional<int> exit_status_;
  std::string exit_signal_;
  bool exited_ = false;
};

}  // namespace hvrun::ssh_detail

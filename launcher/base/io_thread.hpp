#pragma once
// One thread that waits, for the whole launcher, on the descriptors of per-host work that has to go on
// in the background: the SSH exec pumps (ssh/ssh_exec.cpp) and the stderr of --rsh-agent and srun
// commands (command_agent.cpp). One thread serves them all, so that threads, stacks and scheduling do
// not grow with the hosts (a thread per host would be 2 + 2n threads while connecting; docs/DESIGN.md
// §2.1).
//
// The wait is level-triggered epoll, written here rather than taken from Boost.Asio: Asio's epoll
// reactor registers descriptors edge-triggered and does not test readiness when a wait starts, while
// libssh reads its socket in chunks of its own, so a round can leave bytes in the socket that no new
// edge announces. A level-triggered wait sees them.
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.hpp"

namespace hvrun {

// What a client waits for next: up to kMaxFds descriptors with poll(2) events (POLLIN, POLLOUT; an fd
// of -1 or no events: not watched, so a hung-up socket nobody reads does not wake the thread) and a
// deadline; or nothing more (done).
struct IoWant {
  static constexpr std::size_t kMaxFds = 3;
  bool done = false;
  std::array<int, kMaxFds> fd{-1, -1, -1};
  std::array<short, kMaxFds> events{};
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

class IoClient {
 public:
  virtual ~IoClient() = default;
  // On the I/O thread: once when attached, then whenever a descriptor it wants is ready or its deadline
  // has passed. Works without blocking and says what to wait for next. The descriptors it names stay
  // open until finish() or detach(); they may differ from one call to the next.
  virtual IoWant service() = 0;
  // On the I/O thread, once, after service() said done and its descriptors are no longer watched (they
  // may be closed now). `failure` is empty, or why the thread could not watch them (epoll_ctl failed).
  virtual void finish(const std::string& failure) = 0;
};

class IoThread {
 public:
  // The process's I/O thread, started on first use; it ends when the last holder lets go (never on
  // itself: clients are detached by their owners, on their own threads).
  static std::shared_ptr<IoThread> get();
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Any thread: `client` is serviced from now until its service() says done or it is detached. It must
  // stay alive until then.
  void attach(IoClient& client);
  // Any thread but the I/O thread: when it returns, the client is not being serviced and never will be
  // again (finish() is not called for a client that was still running). A finished client returns at once.
  void detach(IoClient& client);

  // How many clients are attached now (tests and --verbose).
  std::size_t clients() const;

 private:
  IoThread();
  struct Slot;
  void run();
  void apply_requests();
  void service(Slot& slot);
  void unwatch(Slot& slot);
  void drop(std::uint64_t id, const std::string& failure, bool finished);

  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd: requests are waiting

  mutable std::mutex mu_;
  std::condition_variable detached_;
  std::vector<IoClient*> to_attach_;
  std::vector<IoClient*> to_detach_;
  std::vector<IoClient*> live_;  // attached and not yet finished or detached (guarded by mu_)
  bool stopping_ = false;

  // The I/O thread's own state.
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace hvrun

#include "launcher/ssh/ssh_exec.hpp"

#include <libssh/server.h>  // ssh_send_keepalive (client-side too, despite the header)
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/byte_tail.hpp"
#include "common/duration_text.hpp"
#include "common/io_sizes.hpp"
#include "common/log.hpp"
#include "launcher/base/io_thread.hpp"
#include "launcher/ssh/ssh_core.hpp"

namespace hvrun {

namespace ssh_detail {

// The pump between one channel and the bridge's end of a socketpair. Why not libssh's ssh_connector:
// in 0.10 it ignores errors on both sides (its exception handlers are empty), closes the descriptor it
// writes to, and knows nothing of keepalives or stderr. This one is explicit about each of those.
//
// The launcher's one I/O thread (launcher/base/io_thread.hpp) runs it: each round holds the session lock
// briefly (nonblocking libssh calls only) and then says what to wait for (the session socket, the
// local socket, a Waiter, a keepalive deadline); nothing spins and no host has a thread of its own.
// The lock is only tried: the I/O thread serves every host and must not wait behind another thread's
// run() or upload() on this connection. A round that finds it taken waits on the Waiter, which that
// thread signals when it took in packets, and retries after kContendedRetry in any case.
class Bridge final : public IoClient {
 public:
  Bridge(std::shared_ptr<Core> core, std::unique_ptr<Channel> channel, UniqueFd local, UniqueFd caller)
      : core_(std::move(core)),
        channel_(std::move(channel)),
        local_(std::move(local)),
        caller_(std::move(caller)),
        waiter_(*core_),
        io_(IoThread::get()) {
    {
      SessionLock lock(*core_, /*nonblocking=*/false);
      // A descriptor of our own for the session socket: epoll watches each descriptor once, and two
      // channels of one connection (run() beside a live exec) may wait on the same socket.
      const int fd = ssh_get_fd(core_->session());
      if (fd >= 0) {
        session_watch_ = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
        if (!session_watch_) throw_errno("fcntl(F_DUPFD_CLOEXEC)", "SSH bridge to " + core_->host);
      }
    }
    io_->attach(*this);
  }

  ~Bridge() override {
    io_->detach(*this);
    if (!finished()) finish("");
  }
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  int caller_fd() const { return caller_.get(); }
  int release_caller_fd() { return caller_.release(); }

  bool wait(std::chrono::milliseconds timeout) const {
    std::unique_lock lock(state_mu_);
    return state_cv_.wait_for(lock, timeout, [this] { return finished_; });
  }
  bool finished() const {
    std::lock_guard lock(state_mu_);
    return finished_;
  }
  std::optional<int> exit_status() const {
    if (!finished()) return std::nullopt;
    return channel_->exit_status();
  }
  std::string exit_signal() const { return finished() ? channel_->exit_signal() : std::string(); }
  std::string stderr_tail() const {
    std::lock_guard lock(state_mu_);
    return stderr_tail_.text();
  }
  std::string failure() const {
    std::lock_guard lock(state_mu_);
    return failure_;
  }

  // On the I/O thread.
  IoWant service() override {
    waiter_.drain();
    IoWant want;
    try {
      Wait wait;
      {
        SessionLock lock(*core_, /*nonblocking=*/true, waiter_.fd(), std::try_to_lock);
        if (!lock.owns_lock()) {
          want.fd[2] = waiter_.fd();
          want.events[2] = POLLIN;
          want.deadline = Clock::now() + kContendedRetry;
          return want;
        }
        wait = round();
      }
      if (wait.done) return {.done = true};
      if (wait.session_events != 0 && wait.session_fd >= 0) {
        want.fd[0] = session_watch_.get();
        want.events[0] = wait.session_events;
      }
      want.fd[1] = local_.get();
      want.events[1] = wait.local_events;
      want.fd[2] = waiter_.fd();
      want.events[2] = POLLIN;
      want.deadline = Clock::now() + std::min<Clock::duration>(wait.timeout, std::chrono::seconds(60));
    } catch (const std::exception& e) {
      std::lock_guard lock(state_mu_);
      failure_ = e.what();
      return {.done = true};
    }
    return want;
  }

  // On the I/O thread when the pump ended, or on the owner's thread after detach().
  void finish(const std::string& failure) override {
    {
      std::lock_guard lock(state_mu_);
      if (failure_.empty()) failure_ = failure;
      if (!failure_.empty()) log_of(LogSubsys::kSsh).debug("{}", failure_);
    }
    close_local();
    {
      std::lock_guard lock(state_mu_);
      finished_ = true;
    }
    state_cv_.notify_all();
  }

 private:
  static constexpr std::chrono::milliseconds kContendedRetry{10};

  // What to wait for after a round.
  struct Wait {
    bool done = false;
    int session_fd = -1;
    short session_events = 0;
    short local_events = 0;
    Clock::duration timeout{};
  };

  // Throws kConnectionLost, recording it on the core so that later calls on the session fail at once.
  [[noreturn]] void lose(const std::string& why) {
    if (core_->lost.empty()) {
      core_->lost = core_->host + ": connection lost (port " + std::to_string(core_->port) + "): " + why;
    }
    core_->throw_if_lost();
    throw core_->error(SshFailure::kConnectionLost, why);  // not reached
  }

  // One round of moving bytes, under the lock. Returns what to wait for next.
  Wait round() {
    core_->throw_if_lost();
    ssh_channel ch = channel_->get();
    const auto packets_at_start = core_->packet_counter.in_packets;
    // stderr first: always drained (into the bounded tail), and reading it lets libssh take in packets.
    drain_stderr(ch);
    stdout_to_local(ch);
    local_to_channel(ch);

    const bool remote_eof = ssh_channel_is_eof(ch) != 0;
    const bool stdout_delivered = to_local_.empty() && ssh_channel_poll(ch, 0) <= 0;
    if (remote_eof && stdout_delivered && !local_shut_) {
      ::shutdown(local_.get(), SHUT_WR);  // the caller reads EOF
      local_shut_ = true;
    }
    if (remote_eof) (void)ssh_channel_get_exit_status(ch);  // nonblocking: takes in exit-status and close
    if (stdout_delivered && (ssh_channel_is_closed(ch) != 0 || (remote_eof && channel_->exited()))) {
      if (ssh_is_connected(core_->session()) == 0 && !channel_->exited()) lose(core_->libssh_error());
      return {.done = true};
    }

    Wait wait;
    wait.timeout = std::chrono::seconds(60);
    if (!(remote_eof && channel_->exited())) {
      // Once the command has exited and sent EOF, only the caller's reading is awaited: nothing in
      // this round would take in (or flush) session traffic, and a pending write would spin poll.
      wait.timeout = keepalive(Clock::now());
      wait.session_fd = ssh_get_fd(core_->session());
      wait.session_events = POLLIN;
      if (ssh_get_poll_flags(core_->session()) & SSH_WRITE_PENDING) wait.session_events |= POLLOUT;
    }
    if (!to_local_.empty()) wait.local_events |= POLLOUT;
    if (!local_eof_ && to_channel_.empty()) wait.local_events |= POLLIN;
    // Packets taken in during this round (by a write's flush, a keepalive, the exit-status check) may
    // hold data or state the steps above ran too early to see, and they no longer make the socket
    // readable: go round again at once. A round that takes in nothing sleeps.
    if (core_->packet_counter.in_packets != packets_at_start) wait.timeout = Clock::duration::zero();
    return wait;
  }

  void drain_stderr(ssh_channel ch) {
    for (;;) {
      int n = ssh_channel_read_nonblocking(ch, buffer_.data(), static_cast<uint32_t>(buffer_.size()), 1);
      if (n == SSH_ERROR) lose(core_->libssh_error());
      if (n <= 0) return;
      std::lock_guard lock(state_mu_);
      stderr_tail_.append(std::string_view(buffer_.data(), static_cast<std::size_t>(n)));
    }
  }

  // Channel stdout -> local socket, as far as the local socket takes it.
  void stdout_to_local(ssh_channel ch) {
    for (;;) {
      if (to_local_.empty()) {
        int n = ssh_channel_read_nonblocking(ch, buffer_.data(), static_cast<uint32_t>(buffer_.size()), 0);
        if (n == SSH_ERROR) lose(core_->libssh_error());
        if (n <= 0) return;
        to_local_.assign(buffer_.data(), static_cast<std::size_t>(n));
      }
      if (local_broken_) {  // the caller is gone: keep draining so the remote side is not stalled
        to_local_.clear();
        continue;
      }
      ssize_t n = ::send(local_.get(), to_local_.data(), to_local_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n == -1) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EPIPE || errno == ECONNRESET) {
          local_broken_ = true;
          continue;
        }
        throw_errno("send", "SSH bridge to " + core_->host);
      }
      to_local_.erase(0, static_cast<std::size_t>(n));
      if (!to_local_.empty()) return;  // the socket is full
    }
  }

  // Local socket -> channel stdin, within the remote window. EOF from the caller becomes channel EOF.
  void local_to_channel(ssh_channel ch) {
    while (!local_eof_ || !to_channel_.empty()) {
      if (to_channel_.empty()) {
        ssize_t n = ::recv(local_.get(), buffer_.data(), buffer_.size(), MSG_DONTWAIT);
        if (n == -1) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          if (errno != ECONNRESET) throw_errno("recv", "SSH bridge to " + core_->host);
          n = 0;  // the caller closed with unread data: as good as EOF
        }
        if (n == 0) {
          local_eof_ = true;
          break;
        }
        to_channel_.assign(buffer_.data(), static_cast<std::size_t>(n));
      }
      if (ssh_channel_is_open(ch) == 0) {  // the command is gone; its stdin with it
        to_channel_.clear();
        continue;
      }
      uint32_t window = ssh_channel_window_size(ch);
      if (window == 0) return;  // wait for the peer to open the window (a packet on the session socket)
      uint32_t size = static_cast<uint32_t>(std::min<std::size_t>(to_channel_.size(), window));
      int n = ssh_channel_write(ch, to_channel_.data(), size);
      if (n == SSH_ERROR) {
        if (ssh_is_connected(core_->session()) == 0) lose(core_->libssh_error());
        to_channel_.clear();  // the channel closed under us
        continue;
      }
      to_channel_.erase(0, static_cast<std::size_t>(n));
      if (!to_channel_.empty()) return;  // partial write (window or rekey): wait for the session socket
    }
    if (!eof_sent_ && ssh_channel_is_open(ch) != 0) {
      if (ssh_channel_send_eof(ch) == SSH_ERROR && ssh_is_connected(core_->session()) == 0) {
        lose(core_->libssh_error());
      }
      eof_sent_ = true;
    }
  }

  // Sends keepalives after keepalive_interval of silence; declares the connection dead after
  // keepalive_interval * keepalive_count_max. Returns how long poll may wait.
  Clock::duration keepalive(Clock::time_point now) {
    const auto interval = core_->keepalive_interval;
    const auto silence = now - core_->last_received;
    if (silence >= interval * core_->keepalive_count_max) {
      lose("no answer to keepalives for " +
           seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(silence)) +
           " (host down or cut off?)");
    }
    if (silence >= interval && now - last_keepalive_ >= interval) {
      // libssh keeps one keepalive request pending: the first call settles the previous one's reply
      // (if any came), the second sends anew.
      ssh_send_keepalive(core_->session());
      ssh_send_keepalive(core_->session());
      last_keepalive_ = now;
    }
    auto next = std::max(core_->last_received, last_keepalive_) + interval;
    auto dead = core_->last_received + interval * core_->keepalive_count_max;
    return std::max(std::min(next, dead) - now, Clock::duration(std::chrono::milliseconds(1)));
  }

  // The caller sees EOF (and EPIPE on writes). Unread input is discarded first: closing an AF_UNIX
  // socket with unread data would give the caller ECONNRESET instead of a clean EOF.
  void close_local() {
    if (!local_) return;
    ::shutdown(local_.get(), SHUT_WR);
    while (::recv(local_.get(), buffer_.data(), buffer_.size(), MSG_DONTWAIT) > 0) {
    }
    local_.reset();
  }

  std::shared_ptr<Core> core_;
  std::unique_ptr<Channel> channel_;
  UniqueFd local_;   // the bridge's end of the socketpair (non-blocking)
  UniqueFd caller_;  // the caller's end, until released
  Waiter waiter_;
  UniqueFd session_watch_;  // a duplicate of the session socket, watched by the I/O thread

  // Pump state, touched by the I/O thread only (and by finish() after detach()).
  std::vector<char> buffer_ = std::vector<char>(kIoChunk);
  std::string to_local_;    // read from the channel, not yet taken by the local socket
  std::string to_channel_;  // read from the local socket, not yet taken by the channel
  bool local_eof_ = false;
  bool local_broken_ = false;
  bool local_shut_ = false;
  bool eof_sent_ = false;
  Clock::time_point last_keepalive_{};

  // Shared with callers.
  mutable std::mutex state_mu_;
  mutable std::condition_variable state_cv_;
  bool finished_ = false;
  ByteTail stderr_tail_{SshExec::kStderrTailBytes};
  std::string failure_;

  std::shared_ptr<IoThread> io_;  // last: attached after every member above exists, detached before they go
};

}  // namespace ssh_detail

using ssh_detail::Bridge;

SshExec SshExec::start(std::shared_ptr<ssh_detail::Core> core, std::unique_ptr<ssh_detail::Channel> channel) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == -1) {
    throw_errno("socketpair", "bridge for the SSH channel to " + core->host);
  }
  UniqueFd local(fds[0]);
  UniqueFd caller(fds[1]);
  return SshExec(std::make_unique<Bridge>(std::move(core), std::move(channel), std::move(local), std::move(caller)));
}

SshExec::SshExec(std::unique_ptr<Bridge> bridge) : bridge_(std::move(bridge)) {}
SshExec::SshExec(SshExec&&) noexcept = default;
SshExec& SshExec::operator=(SshExec&&) noexcept = default;
SshExec::~SshExec() = default;

int SshExec::fd() const { return bridge_ ? bridge_->caller_fd() : -1; }
int SshExec::release_fd() { return bridge_ ? bridge_->release_caller_fd() : -1; }
bool SshExec::wait(std::chrono::milliseconds timeout) const { return !bridge_ || bridge_->wait(timeout); }
bool SshExec::finished() const { return !bridge_ || bridge_->finished(); }
std::optional<int> SshExec::exit_status() const { return bridge_ ? bridge_->exit_status() : std::nullopt; }
std::string SshExec::exit_signal() const { return bridge_ ? bridge_->exit_signal() : std::string(); }
std::string SshExec::stderr_tail() const { return bridge_ ? bridge_->stderr_tail() : std::string(); }
std::string SshExec::failure() const { return bridge_ ? bridge_->failure() : std::string(); }

}  // namespace hvrun

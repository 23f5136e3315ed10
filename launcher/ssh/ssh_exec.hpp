#pragma once
// A remote command bridged to a local socketpair, made by SshSession::exec (launcher/ssh/ssh_session.hpp).
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace hvrun {

namespace ssh_detail {
class Core;
class Channel;
class Bridge;
}  // namespace ssh_detail

class SshSession;

// A remote command whose stdin/stdout are bridged to a local socketpair: fd() behaves like the
// socket of a local child (AF_UNIX, SOCK_STREAM), usable with poll, epoll or Boost.Asio.
//  - Bytes written to fd() reach the command's stdin; shutdown(fd, SHUT_WR) or close sends EOF.
//  - The command's stdout arrives on fd(); when it closes its stdout (or exits, or the connection
//    dies) fd() reads EOF.
//  - stderr is not on fd(): its last kStderrTailBytes are kept for error messages (stderr_tail()).
// The launcher's I/O thread (launcher/base/io_thread.hpp) moves the bytes, for every exec of every host;
// this exec's pump ends when the channel closes (or the connection is presumed
// dead, see SshTarget::keepalive_interval). Destroying an SshExec stops the pump and closes the
// channel; the remote command then sees EOF on stdin.
class SshExec {
 public:
  static constexpr std::size_t kStderrTailBytes = 4096;

  SshExec(SshExec&&) noexcept;
  SshExec& operator=(SshExec&&) noexcept;
  ~SshExec();

  // The caller's end of the socketpair; owned by this SshExec unless released. -1 after release_fd().
  int fd() const;
  // Hands the caller's end over (e.g. to a boost::asio::local::stream_protocol::socket).
  int release_fd();

  // Waits until the pump has ended (channel closed or connection lost); true if it has.
  bool wait(std::chrono::milliseconds timeout) const;
  bool finished() const;
  // After finished(): the command's exit code, or nothing (died by a signal, or connection lost).
  std::optional<int> exit_status() const;
  std::string exit_signal() const;  // "TERM", ... when the command died by a signal
  std::string stderr_tail() const;  // the last kStderrTailBytes of the command's stderr so far
  // Why the pump ended early ("HOST: connection lost ..."); empty after a normal end.
  std::string failure() const;

 private:
  friend class SshSession;
  // Starts the pump over an open channel whose command is running.
  static SshExec start(std::shared_ptr<ssh_detail::Core> core, std::unique_ptr<ssh_detail::Channel> channel);
  explicit SshExec(std::unique_ptr<ssh_detail::Bridge> bridge);
  std::unique_ptr<ssh_detail::Bridge> bridge_;
};

}  // namespace hvrun

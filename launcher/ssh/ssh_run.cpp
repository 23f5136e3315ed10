#include "launcher/ssh/ssh_run.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/duration_text.hpp"
#include "common/io_sizes.hpp"

namespace hvrun::ssh_detail {

namespace {

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

SshError lost_or(const Core& core, SshFailure otherwise, const std::string& what) {
  if (ssh_is_connected(core.session()) == 0) {
    return core.error(SshFailure::kConnectionLost, "connection lost (" + core.libssh_error() + ")");
  }
  return core.error(otherwise, what + ": " + core.libssh_error());
}

// Moves what libssh holds for one stream into `sink` (up to `limit` bytes kept). Under the lock.
void read_available(const Core& core, ssh_channel channel, int is_stderr, std::string& sink, std::size_t limit,
                    std::vector<char>& buffer) {
  for (;;) {
    int n = ssh_channel_read_nonblocking(channel, buffer.data(), static_cast<uint32_t>(buffer.size()), is_stderr);
    if (n == SSH_ERROR) throw lost_or(core, SshFailure::kChannel, "ssh_channel_read_nonblocking");
    if (n <= 0) return;  // nothing now (0) or SSH_EOF
    std::size_t keep = std::min<std::size_t>(static_cast<std::size_t>(n), limit - std::min(limit, sink.size()));
    sink.append(buffer.data(), keep);
  }
}

}  // namespace

RunResult run_command(Core& core, const std::string& command, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Waiter waiter(core);
  std::unique_ptr<Channel> channel = Channel::exec(core, command);
  RunResult result;
  std::vector<char> buffer(kIoChunk);
  bool eof_sent = false;
  for (;;) {
    pollfd fds[2] = {{-1, 0, 0}, {waiter.fd(), POLLIN, 0}};
    bool took_packets;
    {
      SessionLock lock(core, /*nonblocking=*/true, waiter.fd());
      core.throw_if_lost();
      ssh_channel ch = channel->get();
      const auto packets_before = core.packet_counter.in_packets;
      if (!eof_sent) {  // the command gets no stdin
        if (ssh_channel_send_eof(ch) == SSH_ERROR) throw lost_or(core, SshFailure::kChannel, "ssh_channel_send_eof");
        eof_sent = true;
      }
      read_available(core, ch, 1, result.err, SshSession::kRunCaptureLimit, buffer);
      read_available(core, ch, 0, result.out, SshSession::kRunCaptureLimit, buffer);
      if (ssh_channel_is_eof(ch) != 0) {
        (void)ssh_channel_get_exit_status(ch);  // nonblocking: takes in what has arrived after the EOF
        if (channel->exited() || ssh_channel_is_closed(ch) != 0) break;
      } else if (ssh_channel_is_closed(ch) != 0) {
        break;
      }
      fds[0].fd = ssh_get_fd(core.session());
      const bool write_pending = (ssh_get_poll_flags(core.session()) & SSH_WRITE_PENDING) != 0;
      fds[0].events = static_cast<short>(POLLIN | (write_pending ? POLLOUT : 0));
      // Packets taken in by the later calls of this round may hold what the earlier ones looked for,
      // and the socket no longer shows them: look again before sleeping.
      took_packets = core.packet_counter.in_packets != packets_before;
    }
    int wait_ms = remaining_ms(deadline);
    if (wait_ms == 0) {
      throw core.error(SshFailure::kCommandTimeout,
                       "'" + command + "' did not finish within " + seconds_text(timeout) + " (port " +
                           std::to_string(core.port) + ")");
    }
    if (took_packets) continue;
    if (::poll(fds, 2, wait_ms) == -1 && errno != EINTR) throw_errno("poll", "SSH connection to " + core.host);
    if (fds[1].revents & POLLIN) waiter.drain();
  }
  if (!channel->exited()) {
    SessionLock lock(core, /*nonblocking=*/true);
    throw lost_or(core, SshFailure::kChannel, "'" + command + "' ended without an exit status");
  }
  result.exit_status = channel->exit_status().value_or(-1);
  result.exit_signal = channel->exit_signal();
  return result;
}

}  // namespace hvrun::ssh_detail

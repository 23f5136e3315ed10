#include "common/unique_fd.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.hpp"

namespace hvrun {

void UniqueFd::reset(int fd) {
  // close() is not retried on EINTR: on Linux the descriptor is released either way.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Pipe make_pipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2", what);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::pair<UniqueFd, UniqueFd> make_socketpair(const char* what) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("socketpair", what);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd, const char* what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) throw_errno("fcntl(F_GETFL)", what);
  if (::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw_errno("fcntl(F_SETFL)", what);
}

}  // namespace hvrun

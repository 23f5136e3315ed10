#include "common/write_fully.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace hvrun {

bool write_fully(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n >= 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    return false;  // EPIPE and friends: the reader is gone, and nobody can be told
  }
  return true;
}

}  // namespace hvrun

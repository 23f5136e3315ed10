#include "common/close_on_exec.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace hvrun {

// AddressSanitizer's bookkeeping would take the child's own stack for a thread's (child_process.cpp).
__attribute__((no_sanitize("address"))) bool others_close_on_exec() noexcept {
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return true;
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char buffer[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n <= 0) {
      ::close(dir);
      return n == 0;
    }
    // struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name.
    for (long at = 0; at < n;) {
      // d_reclen, little-endian as on every architecture hvrun is built for (x86-64, aarch64).
      const long length = static_cast<unsigned char>(buffer[at + 16]) | static_cast<unsigned char>(buffer[at + 17]) << 8;
      int fd = 0;
      bool number = true;
      for (const char* c = buffer + at + 19; *c != '\0'; ++c) {
        number = number && *c >= '0' && *c <= '9';
        fd = fd * 10 + (*c - '0');
      }
      if (number && fd > 2 && fd != dir) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      at += length;
    }
  }
}

}  // namespace hvrun

#include "agent/crash_handler/frame_places.hpp"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

namespace hvrun::crash_handler {

namespace {

uintptr_t parse_hex(const char*& p, const char* end) {
  uintptr_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9') v = v * 16 + static_cast<uintptr_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v = v * 16 + static_cast<uintptr_t>(c - 'a' + 10);
    else break;
  }
  return v;
}

// One line of /proc/self/maps ("START-END PERMS OFFSET DEV INODE   PATH"): the frames whose lookup
// address lies in it get its file and offset.
void place_line(FramePlaces& s, const char* line, const char* end, void* const* pcs, int n) {
  const char* p = line;
  const uintptr_t start = parse_hex(p, end);
  if (p == end || *p != '-') return;
  ++p;
  const uintptr_t stop = parse_hex(p, end);
  while (p < end && *p == ' ') ++p;
  while (p < end && *p != ' ') ++p;  // past PERMS
  while (p < end && *p == ' ') ++p;
  const uintptr_t offset = parse_hex(p, end);
  for (int field = 0; field < 2 && p < end; ++field) {  // past DEV and INODE
    while (p < end && *p == ' ') ++p;
    while (p < end && *p != ' ') ++p;
  }
  while (p < end && *p == ' ') ++p;
  const unsigned len = static_cast<unsigned>(end - p);
  if (len == 0) return;  // anonymous memory: code made at run time
  int path_at = -1;
  for (int i = 0; i < n; ++i) {
    // A return address points after its call: the call, one byte before, is in the caller's mapping.
    const uintptr_t pc = reinterpret_cast<uintptr_t>(pcs[i]) - (i > 0 ? 1 : 0);
    if (pc < start || pc >= stop) continue;
    if (path_at < 0) {
      if (s.paths_used + len > sizeof s.paths) return;
      memcpy(s.paths + s.paths_used, p, len);
      path_at = static_cast<int>(s.paths_used);
      s.paths_used += len;
    }
    s.places[i] = Place{reinterpret_cast<uintptr_t>(pcs[i]) - start + offset, static_cast<unsigned>(path_at), len};
  }
}

}  // namespace

void place_frames(FramePlaces& s, void* const* pcs, int n) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t have = 0;
  bool skipping = false;  // a line longer than the buffer: its path is not kept
  for (;;) {
    const ssize_t got = ::read(fd, s.maps + have, sizeof s.maps - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    have += static_cast<size_t>(got);
    size_t used = 0;
    for (;;) {
      const char* nl = static_cast<const char*>(memchr(s.maps + used, '\n', have - used));
      if (nl == nullptr) break;
      if (!skipping) place_line(s, s.maps + used, nl, pcs, n);
      skipping = false;
      used = static_cast<size_t>(nl - s.maps) + 1;
    }
    if (used == 0 && have == sizeof s.maps) {
      skipping = true;
      used = have;
    }
    memmove(s.maps, s.maps + used, have - used);
    have -= used;
  }
  ::close(fd);
}

}  // namespace hvrun::crash_handler

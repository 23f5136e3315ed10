#pragma once
// Where each frame of a stack lies, for libhvrun_crash.so's handlers (crash_handler.cpp): the file
// mapped at its address and the offset in that file, from /proc/self/maps, read once for all frames
// with open/read. Names are not looked up in the rank: dladdr and dlsym take the loader's lock (held
// by a thread inside dlopen), and reading symbol tables would need large buffers; hvrun's agent, on
// the same host, names the frames from the files' ELF symbol tables (agent/frame_names.hpp).
// Async-signal-safe, allocates nothing; the caller provides the (large) FramePlaces, from mmap rather
// than the stack: a handler installed after the library's (Python's faulthandler) may run it on an
// alternate stack of a few KiB. No libstdc++.
#include <stdint.h>

namespace hvrun::crash_handler {

constexpr int kMaxFrames = 64;

struct Place {
  uintptr_t file_offset;
  unsigned path_at;   // in FramePlaces::paths
  unsigned path_len;  // 0: not in a file's mapping
};

struct FramePlaces {
  char maps[16 * 1024];
  char paths[16 * 1024];
  unsigned paths_used;
  Place places[kMaxFrames];
};

// Fills s.places[i] for pcs[i], i < n <= kMaxFrames: pcs[0] an exact address (the interrupted
// instruction), the others return addresses. s starts zeroed.
void place_frames(FramePlaces& s, void* const* pcs, int n);

}  // namespace hvrun::crash_handler

#pragma once
// For a child between fork and exec (common/child_process.cpp): every descriptor above 2 close-on-exec,
// so that the program it executes gets its 0, 1 and 2 and nothing else of this process's, whoever
// opened them and however (Asio opens its sockets without SOCK_CLOEXEC).
namespace hvrun {

// close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) (Linux 5.11); on older kernels each descriptor /proc/self/fd
// lists, read with getdents64 into the stack. Async-signal-safe, allocates nothing, and safe on a stack
// of the parent's memory (not instrumented by AddressSanitizer). False when neither could be done.
bool others_close_on_exec() noexcept;

}  // namespace hvrun

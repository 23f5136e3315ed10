#pragma once
// The sizes every reader and every outgoing queue of hvrun share, defined once.
#include <cstddef>

namespace hvrun {

// One read(2), recv or libssh read of a pipe, socket, SSH channel or file: large enough that a rank
// printing fast costs few system calls and frames, small enough for the stack of a thread.
inline constexpr std::size_t kIoChunk = 64 * 1024;

// An outgoing queue (FrameChannel's send queue, OutputWriter's lines) is congested at kQueueHighWater
// queued bytes: its producers stop (ranks block in write, acks are held). It is relieved, once
// congested, only when it falls below kQueueLowWater, so producers do not flap at one boundary.
inline constexpr std::size_t kQueueHighWater = 4u << 20;
inline constexpr std::size_t kQueueLowWater = 1u << 20;

}  // namespace hvrun

#pragma once
// The output pump's flow control, without pipes or sockets: how much of the ranks' output is in flight
// to the launcher, when the agent stops reading the ranks' pipes, and which paused readers an ack or a
// drained channel wakes. Stopped readers leave the ranks blocked in write() on their full pipes, so
// the agent's memory stays bounded and nothing is dropped. The agent (agent.cpp) reads the pipes and
// sends the frames; docs/DESIGN.md §3.3.
//
// A reader is one pipe of one rank: the rank's slot in the RankTable and the stream.
#include <cstddef>
#include <vector>

#include "common/control_message.hpp"

namespace hvrun {

// Reads of a reaped rank's pipe sent before its exit, past the window, so that a failing rank's last
// lines precede its exit report. Bounded: a child that outlives the rank and keeps writing must not
// hold the agent's loop (its output goes on through the readers, under flow control).
inline constexpr int kDrainChunks = 16;

class OutputFlow {
 public:
  struct Reader {
    std::size_t slot = 0;
    OutputStream stream = OutputStream::kStdout;
    bool operator==(const Reader&) const = default;
  };

  // Blocked: the launcher has not yet acknowledged a window (kOutputWindow) of output, or the channel to
  // it is congested (FrameChannel::congested: its queue at kQueueHighWater).
  bool blocked(bool channel_congested) const { return channel_congested || unacked_ >= kOutputWindow; }
  // A reader found its pipe readable: true when it reads now; false when it is paused instead, until
  // resume() returns it.
  bool admit(Reader reader, bool channel_congested);
  // `bytes` of output payload went into the channel.
  void sent(std::size_t bytes) { unacked_ += bytes; }
  // The launcher took `bytes` more (OutputAckMsg). Throws ProtocolError when it acknowledges nothing,
  // or more than is outstanding.
  void acknowledge(int bytes);
  // After an ack or the channel draining: every paused reader, in the order they paused, when no
  // longer blocked (each then reads once, even if the first reads block the flow again); else none.
  std::vector<Reader> resume(bool channel_congested);

  std::size_t unacked() const { return unacked_; }
  std::size_t paused() const { return paused_.size(); }

 private:
  std::size_t unacked_ = 0;  // output payload sent and not yet acknowledged
  std::vector<Reader> paused_;
};

}  // namespace hvrun

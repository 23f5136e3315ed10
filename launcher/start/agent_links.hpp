#pragma once
// The launcher's ends of the agents' control channels, one per host of the job: attaching a channel
// (the JobMsg first), the heartbeats hvrun sends on every live channel, the watchdog that notices a
// silent agent (common/heartbeat.hpp), and output flow control (OutputAckMsg). What the frames
// mean is the job's business: the links hand them on.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "common/frame_codec.hpp"
#include "common/unique_fd.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class AgentLinks {
 public:
  struct Events {
    // A frame from the agent of host i, after its watchdog was rearmed.
    std::function<void(std::size_t i, Frame&& frame)> on_frame;
    // The channel of host i ended (an empty string for a clean end), or the agent went silent for a
    // heartbeat period (the channel is closed first; not for a link already marked closed).
    std::function<void(std::size_t i, const std::string& error)> on_closed;
  };

  // One link per host, named as in `hosts` ("agent on NAME" in messages); none attached yet.
  AgentLinks(boost::asio::io_context& io, std::vector<std::string> hosts, std::chrono::milliseconds heartbeat_timeout,
             Events events);
  ~AgentLinks();
  AgentLinks(const AgentLinks&) = delete;
  AgentLinks& operator=(const AgentLinks&) = delete;

  // One more host (an elastic job's newcomer), not attached yet; returns its index.
  std::size_t add(std::string host);

  // Starts the conversation with the agent of host i over `fd`: reads its frames, sends `job`, arms
  // the watchdog.
  void attach(std::size_t i, UniqueFd fd, const JobMsg& job);
  // Sends a heartbeat on every live link each heartbeat interval, until close_all().
  void start_heartbeats();

  // Sends on a live link (attached, not closed); anything else is dropped.
  void send(std::size_t i, const ControlMessage& msg);
  void send_all(const ControlMessage& msg);
  bool live(std::size_t i) const;
  bool attached(std::size_t i) const;
  bool closed(std::size_t i) const;
  bool all_closed() const;
  // The job is done with host i: no more sends, its watchdog stops.
  void mark_closed(std::size_t i);
  // Hosts never attached (still connecting) are abandoned: marked closed, their agents dropped on arrival.
  void abandon_unattached();
  // Closes the channel of host i, without calling on_closed.
  void close_channel(std::size_t i);
  // The end: every channel closed, every watchdog and the heartbeats stopped.
  void close_all();
  // Who the agent of host i is, for messages ("agent on NAME").
  const std::string& peer(std::size_t i) const;

  // Output flow control: host i's agent sent `bytes` of output, which hvrun took in. Acknowledged in
  // quarter windows while hvrun's stdout keeps up; while it does not (`congested`), acks are held
  // back, so agents stop reading their ranks' pipes.
  void took_output(std::size_t i, std::size_t bytes, bool congested);
  // hvrun's stdout caught up: every link's outstanding output is acknowledged.
  void acknowledge_all();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

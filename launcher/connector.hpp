#pragma once
// Starts the agents of the hosts that are not this machine (SSH, --rsh-agent, srun): all at once, each
// on a connection thread of its own, since libssh's connect, handshake and authentication block and
// cannot be interrupted (docs/DESIGN.md §2.1). Each result reaches the event loop through a mailbox.
// The threads are detached: a thread that finishes after the Connector is gone finds the mailbox empty
// and drops its agent, which closes its SSH session and with it the remote agent.
// (The local agent needs none of this: LocalAgent starts it at once.)
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "launcher/host_agent.hpp"
#include "launcher/launch_options.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class Connector {
 public:
  // Starts the agent of one host and waits until it is up; runs on a connection thread. Throws Error.
  using StartAgent = std::function<std::unique_ptr<HostAgent>(const std::string& host)>;
  // Runs on the event loop's thread, once per connect(): `agent` when it is up, else `error` (one line
  // naming the host and what to do, and no agent).
  using OnConnected = std::function<void(std::size_t index, std::shared_ptr<HostAgent> agent, const std::string& error)>;

  Connector(boost::asio::io_context& io, StartAgent start, OnConnected on_connected);
  // Results that arrive later are dropped, and their agents with them; their threads end by
  // themselves (within --ssh-connect-timeout and --start-timeout).
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // Starts connecting host `name`; its result comes to on_connected with `index`.
  void connect(std::size_t index, const std::string& name);

  // The way a launch starts them: start_host_agent (agent_starter.hpp) with `options`; `agent_path`
  // is this machine's hvrun-agent.
  static StartAgent host_agent_starter(const LaunchOptions& options, const std::string& agent_path);

 private:
  struct Mailbox;
  std::shared_ptr<Mailbox> mailbox_;
  StartAgent start_;
};

}  // namespace hvrun

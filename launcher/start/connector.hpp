#pragma once
// Starts the agents of the hosts that are not this machine (SSH, --rsh-agent, srun) on a fixed pool of
// connection threads, at most `concurrency` hosts at a time (--connect-concurrency): libssh's connect,
// handshake and authentication block and cannot be interrupted (docs/DESIGN.md §2.1), and one thread
// per host made threads, stacks and the `ssh -G` and name lookups running at once grow with the hosts.
// Once up, an agent needs no thread of its own (its SSH channel is pumped by the I/O thread,
// launcher/base/io_thread.hpp). Each result reaches the event loop through a mailbox. The threads are
// detached: a thread that finishes after the Connector is gone finds the mailbox closed, drops its agent
// (which closes its SSH session and with it the remote agent) and starts no other host.
// (The local agent needs none of this: LocalAgent starts it at once.)
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "launcher/cli/launch_options.hpp"
#include "launcher/start/host_agent.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class Connector {
 public:
  // Starts the agent of one host and waits until it is up; runs on a connection thread. Throws Error.
  // It calls `shell_started` (on its thread) once the host has been asked to run the agent (over SSH:
  // the session is up and the exec request sent, so the host's login shell runs from then on).
  using StartAgent =
      std::function<std::unique_ptr<HostAgent>(const std::string& host, const std::function<void()>& shell_started)>;
  // Runs on the event loop's thread, once per connect(): `agent` when it is up, else `error` (one line
  // naming the host and what to do, and no agent).
  using OnConnected = std::function<void(std::size_t index, std::shared_ptr<HostAgent> agent, const std::string& error)>;

  // Runs on the event loop's thread when host `index` leaves the queue and starts connecting (so that
  // time limits can count from a host's turn, not from the launch: with more hosts than threads, the
  // last ones wait for earlier ones to finish).
  using OnTurn = std::function<void(std::size_t index)>;
  // Runs on the event loop's thread when host `index`'s start called shell_started.
  using OnShell = std::function<void(std::size_t index)>;

  Connector(boost::asio::io_context& io, StartAgent start, OnConnected on_connected, std::size_t concurrency,
            OnTurn on_turn = {}, OnShell on_shell = {});
  // Results that arrive later are dropped, and their agents with them; their threads end by
  // themselves (within --ssh-connect-timeout and --start-timeout).
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // Queues host `name`; it starts when a connection thread is free, and its result comes to
  // on_connected with `index`. Hosts start in the order they were queued.
  void connect(std::size_t index, const std::string& name);

  // Connection threads running now (at most the concurrency; they end when the queue is empty).
  std::size_t threads() const;

  // The way a launch starts them: start_host_agent (agent_starter.hpp) with `options`; `agent_path`
  // is this machine's hvrun-agent.
  static StartAgent host_agent_starter(const LaunchOptions& options, const std::string& agent_path);

 private:
  struct Mailbox;
  static void work(const std::shared_ptr<Mailbox>& box);
  std::shared_ptr<Mailbox> mailbox_;
};

}  // namespace hvrun

#pragma once
// Starting a job's agents: this machine's as child processes, every other host's through the Connector
// (SSH or --rsh-agent), all at once; the status line while they come; and each agent's hello. The job
// owns its hosts and the channels (AgentLinks); this class tells it, through Hooks, when an agent can
// be attached, when a start failed, and when every start has ended.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/control_message.hpp"
#include "common/unique_fd.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

// The job's hosts: the plan's hosts that run a rank, in plan order, each marked local when it is this
// machine (host_locality.hpp, each name resolved within `resolve_timeout`).
std::vector<JobHost> job_hosts(const RankPlan& plan, std::chrono::milliseconds resolve_timeout);

// The hello of `h`'s agent, for both drivers: a second one, or one of another hvrun version (or control
// protocol), is a ProtocolError naming `peer`; else the host is greeted (HostPhase::kGreeted), its hello
// and MASTER_PORT kept.
void greet(JobHost& h, HelloMsg m, const std::string& peer);
// The ready of `h`'s agent: out of turn (before the hello, or twice) a ProtocolError naming `peer`; else
// the next phase (HostLife::ready) and the store port kept.
void accept_ready(JobHost& h, const ReadyMsg& m, bool needs_sync, bool wants_fingerprint, const std::string& peer);

class AgentStartup {
 public:
  struct Hooks {
    // Whether the job is still starting; after that, an agent that arrives is not attached.
    std::function<bool()> starting;
    // The agent of hosts[i] is reachable over the fd: the job starts the conversation.
    std::function<void(std::size_t, UniqueFd)> attach;
    // hosts[i]'s turn to connect has come (it waited in the Connector's queue until then).
    std::function<void(std::size_t)> turn;
    // The agent of hosts[i] could not be started; hosts[i].connect_error says why.
    std::function<void(std::size_t)> failed;
    // Every start has ended, attached or failed; called once, while the job is starting.
    std::function<void()> connected;
  };

  // `hosts` (job_hosts) and `plan` must outlive this object; `start`: when the job started, for the
  // status line's elapsed time.
  AgentStartup(boost::asio::io_context& io, const LaunchOptions& options, const RankPlan& plan,
               std::vector<JobHost>& hosts, std::chrono::steady_clock::time_point start, Hooks hooks);
  ~AgentStartup();  // drops the Connector first, so no late result reaches the job
  AgentStartup(const AgentStartup&) = delete;
  AgentStartup& operator=(const AgentStartup&) = delete;

  // Starts every host's agent (local ones attach at once) and the status line when some host is remote.
  void start();
  // Records hosts[i]'s hello. Throws ProtocolError (`peer` in messages) for a second hello or another
  // hvrun version.
  void hello(std::size_t i, HelloMsg m, const std::string& peer);
  // Every host's agent said hello and is ready, or (under --check-only, which reports them) failed to start.
  bool all_up() const;
  // Two entries of one multi-host job that reach the same network stack (same_host.hpp). A job whose
  // every host is this machine is exempt: there loopback is the NIC and nothing is probed.
  std::optional<std::string> same_host() const;

  void clear_status();  // before a line of the log, so it does not land inside the status line
  void stop();          // no more redraws

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

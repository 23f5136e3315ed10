#pragma once
// The fixed job's agents from their start to the probes (Job, job.cpp): the hosts of the plan (one per
// host the plan gives a rank), an agent started on each (AgentStartup), each attached with its JobMsg
// (rank 0's host serves the store), --start-timeout (longer for a host whose login shell still runs),
// their hello and ready, and the probes (Hooks::all_up) once every agent is up, or under --check-only
// has failed. What follows is JobLaunch's.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/control_message.hpp"
#include "common/job_secret.hpp"
#include "common/unique_fd.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/job/job_restarts.hpp"
#include "launcher/job/launch_timings.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/agent_startup.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class JobAgents {
 public:
  struct Hooks {
    std::function<void(const std::vector<std::string>&)> make_links;  // one link per host, in order
    std::function<void()> assign_ranks;  // which host runs which rank, from the plan
    std::function<void(std::size_t)> start_failed;  // hosts[i]'s agent could not be started
    std::function<void(std::size_t)> ask_fingerprint;
    std::function<void()> all_up;  // every agent is up: the probes begin
    // The job's one deadline, its failure and its shutdown.
    std::function<void(std::chrono::milliseconds, std::function<void()>)> arm_deadline;
    std::function<void(const std::string&)> fail;
    std::function<void()> shut_down;
  };
  // What the job holds (`hosts` are made by start(), `links` by Hooks::make_links); all of it outlives
  // this object.
  struct Job {
    RankPlan& plan;
    std::vector<JobHost>& hosts;
    const std::unique_ptr<AgentLinks>& links;
    const std::unique_ptr<SyncRun>& sync;
    const JobSecret& secret;
    bool stall_enabled;
    JobRestarts& restarts;
    Teardown& teardown;
    LaunchTimings& timings;
  };

  JobAgents(boost::asio::io_context& io, const LaunchOptions& options, Job job, Hooks hooks);

  // The hosts from the plan (a host without a rank is dropped from it under --max-restarts), their
  // links, and every agent's start.
  void start();
  // --start-timeout has passed: the job fails, unless a host's login shell still runs (check_start).
  void on_start_timeout();
  void on_hello(std::size_t i, HelloMsg m);
  void on_ready(std::size_t i, const ReadyMsg& m);

  void clear_status();  // before a line of the log, so it does not land inside the status line
  void stop();          // no more redraws

 private:
  using Clock = LaunchTimings::Clock;
  using Phase = Teardown::Phase;

  void attach(std::size_t i, UniqueFd fd);
  bool needs_sync(std::size_t i) const;
  void on_connected();
  void maybe_probe();

  boost::asio::io_context& io_;
  const LaunchOptions& options_;
  Job job_;
  Hooks hooks_;
  std::unique_ptr<AgentStartup> startup_;  // its Connector goes first, so no late result reaches the job
};

}  // namespace hvrun

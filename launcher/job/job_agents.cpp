#include "launcher/job/job_agents.hpp"

#include <spdlog/spdlog.h>

#include "launcher/base/exit_codes.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/rank_launch.hpp"
#include "launcher/start/connect_progress.hpp"

namespace hvrun {

JobAgents::JobAgents(boost::asio::io_context& io, const LaunchOptions& options, Job job, Hooks hooks)
    : io_(io), options_(options), job_(job), hooks_(std::move(hooks)) {}

void JobAgents::start() {
  RankPlan& plan = job_.plan;
  std::vector<JobHost>& hosts = job_.hosts;
  hosts = job_hosts(plan, kResolveTimeout);
  job_.restarts.hosts_known();
  // A host that -np leaves without a rank gets no agent, so no restart may place ranks there.
  if (job_.restarts.enabled() && hosts.size() < plan.hosts().size()) {
    std::vector<bool> unused(plan.hosts().size(), true);
    for (const JobHost& h : hosts) unused[h.plan_index] = false;
    plan = plan.without(unused, plan.size());
  }
  hooks_.assign_ranks();
  std::vector<std::string> names;
  for (const JobHost& h : hosts) names.push_back(h.name);
  hooks_.make_links(names);
  startup_ = std::make_unique<AgentStartup>(
      io_, options_, plan, hosts, job_.timings.start,
      AgentStartup::Hooks{.starting = [this] { return job_.teardown.phase() == Phase::kStarting; },
                          .attach = [this](std::size_t i, UniqueFd fd) { attach(i, std::move(fd)); },
                          // --start-timeout counts from the last host's turn to connect.
                          .turn =
                              [this](std::size_t) {
                                hooks_.arm_deadline(options_.start_timeout, [this] { on_start_timeout(); });
                              },
                          .failed = [this](std::size_t i) { hooks_.start_failed(i); },
                          .connected = [this] { on_connected(); }});
  startup_->start();
  job_.links->start_heartbeats();
}

// Every agent start has ended.
void JobAgents::on_connected() {
  job_.timings.connected = Clock::now();
  if (options_.check_only) return maybe_probe();
  if (const auto failures = connect_failures(job_.hosts)) hooks_.fail(*failures);
}

// Starts the conversation with the agent of hosts[i] over `fd`. What its ranks would run is asked in
// the same breath (the agent answers after its `ready`): the slowest host's answer is what a launch
// whose NICs are decided at once (the probe cache) waits for. A host that must first get --sync's files
// is asked once it has them (JobLaunch::on_synced).
void JobAgents::attach(std::size_t i, UniqueFd fd) {
  const bool serves_store = rank0_host(job_.hosts, job_.plan) == i;
  job_.hosts[i].life.attach();
  job_.links->attach(i, std::move(fd),
                     JobMsg{job_.secret.hex(), static_cast<int>(options_.heartbeat_timeout.count()),
                            static_cast<int>(i), serves_store, job_.stall_enabled, false, !options_.no_straggler_watch,
                            mpi_marker_for(options_, job_.secret)});
  if (!needs_sync(i)) hooks_.ask_fingerprint(i);
}

bool JobAgents::needs_sync(std::size_t i) const { return job_.sync && job_.sync->needs(job_.hosts[i]); }

// Probing starts when every host has either said hello or (under --check-only, which reports them)
// failed to connect.
void JobAgents::maybe_probe() {
  if (job_.teardown.phase() != Phase::kStarting || !startup_->all_up()) return;
  startup_->clear_status();
  job_.timings.agents_up = Clock::now();
  if (const auto twin = startup_->same_host()) {
    job_.teardown.record_failure(kExitUsage);
    spdlog::error("error: {}", *twin);
    return hooks_.shut_down();
  }
  hooks_.all_up();
}

// A host whose login shell still runs gets longer than --start-timeout (check_start).
void JobAgents::on_start_timeout() {
  const StartCheck check = check_start(job_.hosts, Clock::now(), options_.start_timeout);
  if (check.give_up) return hooks_.fail(*check.give_up);
  if (check.recheck > std::chrono::milliseconds(0))
    hooks_.arm_deadline(check.recheck, [this] { on_start_timeout(); });
}

void JobAgents::on_hello(std::size_t i, HelloMsg m) {
  startup_->hello(i, std::move(m), job_.links->peer(i));
  maybe_probe();
}

void JobAgents::on_ready(std::size_t i, const ReadyMsg& m) {
  accept_ready(job_.hosts[i], m, needs_sync(i), !options_.command.empty(), job_.links->peer(i));
  // What the ranks would run there is learnt while the probes run (JobLaunch): asked at attach, or with
  // --sync once that host has the files (this machine is their source).
  if (needs_sync(i)) job_.links->send(i, job_.sync->check());
  maybe_probe();
}

void JobAgents::clear_status() { startup_->clear_status(); }

void JobAgents::stop() { startup_->stop(); }

}  // namespace hvrun

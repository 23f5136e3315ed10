#pragma once
// What every job holds and does, whichever its policy (docs/DESIGN.md 6.1): the event loop and its
// signals, the job's secret, its hosts (JobHost, each with its HostLife) and their links (AgentLinks),
// the rank output (OutputMux), one frame dispatch with one rule for exceptions, --sync (SyncRun), the
// stall watch, the hang autopsy (HangAutopsy), what ranks are asked to run (the environment policy, the
// working directory, the fingerprint request), and the local agents' reaping. Two policies derive from
// it, each as JobCore<itself>: the fixed job (Job::Impl, job.cpp, over job_agents, job_launch,
// job_restarts for --max-restarts, and job_end) and Horovod's elastic rounds (ElasticJob::Impl,
// elastic_job.cpp, over elastic_admission, elastic_workers and elastic_rounds). A policy provides, for
// the core to call:
//   void handle(std::size_t host, M message)  for each control message it takes (with `using
//                                             JobCore::handle;`, and a template that refuses the rest)
//   void check_rank_of(std::size_t host, int rank)   ProtocolError for a rank not on that host
//   void on_agent_closed(std::size_t host, const std::string& error)
//   void fail_job(const std::string& why)     the job cannot go on: its orderly end
//   void autopsy_over(std::chrono::milliseconds grace)  the stacks are printed: the ranks stop now
// and may hide took_output() (called on each output chunk).
#include <signal.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/control_message.hpp"
#include "common/error.hpp"
#include "common/heartbeat.hpp"
#include "common/job_secret.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/job/hang_autopsy.hpp"
#include "launcher/job/job_record.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/rank_launch.hpp"
#include "launcher/job/stall_watch.hpp"
#include "launcher/job/straggler_board.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

template <class Policy>
class JobCore {
 protected:
  using Clock = std::chrono::steady_clock;

  explicit JobCore(LaunchOptions o)
      : options(std::move(o)),
        signals(io, SIGINT, SIGTERM),
        stall_timer(io),
        secret(JobSecret::generate()),
        stall(options.stall_timeout, heartbeat_interval(options.heartbeat_timeout)),
        record(options.check_only || options.dry_run ? "" : options.events_file, options.rank_table || options.verbose,
               // --mpi: mpirun writes the ranks' output itself, so no line of hvrun's can be erased before it.
               options.check_only || options.dry_run || options.mpi ? -1 : STDERR_FILENO),
        autopsy(io, HangAutopsy::Hooks{.ask = [this](std::size_t i) {
                                         links->send(i, StacksRequestMsg{static_cast<int>(kStackTimeout.count())});
                                       },
                                       .ended = [this](const std::string& report, std::chrono::milliseconds grace) {
                                         output->drain(kReportDrainTimeout);
                                         log_report(LogLevel::warn, report);
                                         policy().autopsy_over(grace);
                                       }}) {}

  LaunchOptions options;
  boost::asio::io_context io;
  boost::asio::signal_set signals;
  boost::asio::steady_timer stall_timer;  // --stall-timeout's checks while ranks run
  JobSecret secret;
  std::vector<JobHost> hosts;           // index = link index
  std::unique_ptr<AgentLinks> links;    // one per host
  std::unique_ptr<OutputMux> output;
  std::unique_ptr<SyncRun> sync;        // --sync: listed and hashed before any host is contacted
  StallWatch stall;
  JobRecord record;                     // --events, the ranks' table, the live status line (issue 40)
  HangAutopsy autopsy;                  // on the first signal and at --stall-timeout, before the ranks stop

  // The links, one per name in `names` (more may be added); frames and losses go to the policy.
  void make_links(const std::vector<std::string>& names) {
    links = std::make_unique<AgentLinks>(
        io, names, options.heartbeat_timeout,
        AgentLinks::Events{.on_frame = [this](std::size_t i, Frame&& f) { on_frame(i, std::move(f)); },
                           .on_closed = [this](std::size_t i, const std::string& e) { policy().on_agent_closed(i, e); }});
  }

  // The output of `ranks` ranks (workers), their files made as each starts with `files_on_demand`.
  void make_output(int ranks, bool files_on_demand) {
    output = std::make_unique<OutputMux>(
        ranks, OutputOptions{options.output_filename, options.prefix_timestamp, 1, 2, 10, files_on_demand},
        [this] { boost::asio::post(io, [this] {
          if (links) links->acknowledge_all();
        }); },
        RankLogs(options.logs, job_run_id(options)));
  }

  // The ranks' environment policy and working directory, the same for the fingerprints and the launch.
  const EnvPolicy& env() {
    if (!env_policy_) env_policy_.emplace(launcher_environment(), options);
    return *env_policy_;
  }
  const std::string& rank_cwd() {
    if (!cwd_) cwd_ = current_directory();
    return *cwd_;
  }

  // Asks hosts[i] what its ranks would run (when the job has a command).
  void ask_fingerprint(std::size_t i) {
    if (!options.command.empty())
      links->send(i, FingerprintRequestMsg{options.command, rank_cwd(), hosts[i].is_local ? env().local() : env().remote()});
  }

  // After the loop: each local agent is reaped (SIGKILL to its group after kShutdownTimeout).
  void reap_local_agents() {
    for (auto& h : hosts)
      if (h.local) h.local->reap(kShutdownTimeout);
  }

  // One dispatch for both policies: output to the OutputMux (after the policy checked its rank), control
  // messages to the policy's handle(). A ProtocolError is the agent's loss (its channel closed); anything
  // else (a rank environment hvrun cannot encode, a failed system call) fails the job through its
  // orderly end, never past it.
  void on_frame(std::size_t i, Frame&& f) {
    Policy& p = policy();
    try {
      if (f.type == FrameType::kOutput) {
        OutputChunk c = decode_output(f.payload, links->peer(i));
        p.check_rank_of(i, c.rank);
        p.took_output();
        stall.output(Clock::now());
        record.clear_status();
        output->write(c.rank, c.stream, c.bytes);
        links->took_output(i, c.bytes.size(), output->congested());
        return;
      }
      std::visit([&](auto&& m) { p.handle(i, std::move(m)); }, decode_control(f.payload, links->peer(i)));
    } catch (const ProtocolError& e) {
      links->close_channel(i);
      p.on_agent_closed(i, e.what());
    } catch (const std::exception& e) {
      p.fail_job(user_message(e, "handling a message from the agent on " + hosts[i].name));
    }
  }
  void took_output() {}

  void handle(std::size_t i, StacksMsg m) {
    autopsy.stacks(i, std::move(m), [this, i](int rank) { policy().check_rank_of(i, rank); });
  }

  // A warning an agent has for the user (strangers on its listeners): fixed and elastic jobs alike.
  void handle(std::size_t, NoticeMsg m) { spdlog::warn("{}", m.text); }

  // Issue 40: a host's part of an observation window; a rank that holds the job back, or no longer does,
  // gets its line.
  void handle(std::size_t i, ObservationMsg m) {
    for (const RankObservation& r : m.ranks) policy().check_rank_of(i, r.rank);
    if (!stragglers) stragglers.emplace(hosts.size());
    record.observed(hosts[i].name, m);
    const auto host_of = [this](const std::string& address) -> std::string {
      for (const JobHost& h : hosts)
        if (h.hello)
          for (const InterfaceInfo& nic : h.hello->interfaces)
            for (const std::string& a : nic.addresses)
              if (a == address) return h.name;
      return "";
    };
    for (const auto& e : stragglers->report(i, hosts[i].name, m, Clock::now(), host_of)) {
      record.straggler(e);
      if (e.recovered)
        spdlog::info("{}", e.text);
      else
        spdlog::warn("{}", e.text);
    }
  }

  // A rank started or ended on hosts[i] (after the policy checked that it runs there).
  void rank_started(std::size_t i, const StartedMsg& m) { record.rank_started(m.rank, hosts[i].name, m.pid); }
  void rank_exited(std::size_t i, const ExitedMsg& m) { record.rank_exited(m.rank, hosts[i].name, m); }

  // The job begins (its hosts and ranks as first planned) and ends: --events and the ranks' table.
  void record_start(const char* policy, int ranks) {
    nlohmann::json names = nlohmann::json::array();
    for (const HostSpec& h : options.hosts) names.push_back(h.name);
    record.event("job_start", {{"policy", policy}, {"np", ranks}, {"hosts", std::move(names)}, {"command", options.command}});
  }
  int record_end(int exit_code) {
    record.ended(exit_code);
    return exit_code;
  }

  void handle(std::size_t i, SyncNeedMsg m) {
    if (!sync) throw ProtocolError(links->peer(i) + ": sync need out of turn");
    sync->need(i, m, links->peer(i));
  }

 private:
  Policy& policy() { return static_cast<Policy&>(*this); }

  std::optional<StragglerBoard> stragglers;  // from the first observation on
  std::optional<EnvPolicy> env_policy_;
  std::optional<std::string> cwd_;
};

}  // namespace hvrun

#include "launcher/job/job.hpp"

#include <signal.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <iostream>
#include <algorithm>
#include <functional>
#include <optional>
#include <spdlog/spdlog.h>

#include "common/control_message.hpp"
#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/heartbeat.hpp"
#include "common/exit_status.hpp"
#include "common/job_secret.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/job/hang_autopsy.hpp"
#include "launcher/job/job_agents.hpp"
#include "launcher/job/job_core.hpp"
#include "launcher/job/job_end.hpp"
#include "launcher/job/job_launch.hpp"
#include "launcher/job/job_restarts.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/launch_timings.hpp"
#include "launcher/job/rank_exits.hpp"
#include "launcher/job/rank_launch.hpp"
#include "launcher/job/stack_groups.hpp"
#include "launcher/job/stall_watch.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/ranks/dry_run.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/ranks/mpirun_process.hpp"
#include "launcher/ranks/user_env.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/agent_startup.hpp"
#include "launcher/start/connect_progress.hpp"
#include "launcher/start/job_host.hpp"
#include "launcher/start/sync_manifest.hpp"

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

// The fixed job's policy over JobCore: one plan of ranks, its agents started, the events of its
// ranks, and the teardown state machine (Teardown) carried out. The way from the agents up to the
// ranks running is JobLaunch's; --max-restarts is JobRestarts'.
struct Job::Impl : JobCore<Job::Impl> {
  using Host = JobHost;
  using Phase = Teardown::Phase;
  using JobCore::handle;

  explicit Impl(LaunchOptions o)
      : JobCore(std::move(o)),
        plan(options.hosts, options.np, options.no_oversubscribe),
        teardown(options.kill_grace),
        end(io, JobEnd::Job{teardown, links, output, sync, autopsy, stall_timer},
            JobEnd::Hooks{.start_autopsy = [this](milliseconds grace) { start_autopsy(grace); },
                          .clear_status = [this] { agents->clear_status(); },
                          .stop_status = [this] { agents->stop(); }}),
        restarts(options, plan, hosts, links, exits, teardown,
                 JobRestarts::Hooks{.arm_deadline = [this](milliseconds after,
                                                           std::function<void()> f) { end.arm_deadline(after, std::move(f)); },
                                    .cancel_deadline = [this] { end.cancel_deadline(); },
                                    .fail = [this](const std::string& why) { fail_job(why); },
                                    .shut_down = [this] { end.shut_down(); },
                                    .replanned = [this] { launch->forget_rendezvous(); },
                                    .agents_ready = [this] { launch->serve_horovod_rendezvous(); },
                                    .restarting =
                                        [this](const std::string& why, int used, int max) {
                                          record.event("restart", {{"why", why}, {"restart", used}, {"of", max}});
                                        }}) {}

  RankPlan plan;
  RankExits exits;
  using Clock = LaunchTimings::Clock;
  LaunchTimings timings;  // when each phase ended, for --verbose (log_timings)
  Teardown teardown;
  JobEnd end;  // Teardown's decisions carried out, and the job's deadline
  JobRestarts restarts;
  std::unique_ptr<JobLaunch> launch;  // from run() on
  std::unique_ptr<JobAgents> agents;  // last: its Connector goes first, so no late result reaches the job

  int run() {
    if (plan.oversubscribed() && !options.oversubscribe)
      spdlog::warn("-np {} exceeds the {} slots of the host list; hosts run more ranks than slots "
                   "(use --no-oversubscribe to make this an error)",
                   plan.size(), plan.total_slots());
    if (options.dry_run && !options.mpi) {
      print_dry_run(std::cout, plan, options, launcher_environment());
      return kExitOk;
    }
    make_launch();
    make_output(plan.size(), false);
    record_start("fixed", plan.size());
    if (!options.sync_dirs.empty()) {
      sync = std::make_unique<SyncRun>(
          io, sync_manifest(options.sync_dirs, options.sync_limit), hosts, options.start_timeout, options.check_only,
          !options.command.empty(),
          SyncRun::Hooks{.synced = [this](std::size_t i) { launch->on_synced(i); },
                         .failed =
                             [this](std::size_t, const std::string& line) {
                               fail_job(line + "; check that host's disk and permissions, or copy the files there yourself");
                             },
                         .stopping = [this] { return teardown.tearing_down(); },
                         .may_draw = [this] { return teardown.phase() != Phase::kStarting; }});
      if (sync->manifest().files.empty())
        spdlog::warn("--sync: no files under {}; nothing to send", fold_names(options.sync_dirs));
    }
    make_agents();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    end.arm_deadline(options.start_timeout, [this] { agents->on_start_timeout(); });
    run_loop();
    signals.cancel();
    reap_local_agents();
    log_timings();
    // --mpi, observed: mpirun ran with the loop, or still runs when something else ended the loop first.
    if (mpirun_exit) return record_end(launch->ended(*mpirun_exit));
    if (mpirun_running) return record_end(launch->ended(wait_mpirun(*mpirun_running)));
    const auto& mpirun = launch->mpirun();
    if (!mpirun || teardown.exit_code() != kExitOk) return record_end(launch->ended(teardown.exit_code()));
    if (options.dry_run) {
      std::cout << shell_line(*mpirun) << std::endl;
      return kExitOk;
    }
    return record_end(launch->ended(run_mpirun(*mpirun)));
  }

  void make_launch() {
    launch = std::make_unique<JobLaunch>(
        io, options,
        JobLaunch::Job{plan, hosts, links, output, sync, secret, restarts, teardown, timings},
        JobLaunch::Hooks{.arm_deadline = [this](milliseconds after,
                                                std::function<void()> f) { end.arm_deadline(after, std::move(f)); },
                         .cancel_deadline = [this] { end.cancel_deadline(); },
                         .fail = [this](const std::string& why) { fail_job(why); },
                         .shut_down = [this] { end.shut_down(); },
                         .env = [this]() -> const EnvPolicy& { return env(); },
                         .cwd = [this]() -> const std::string& { return rank_cwd(); },
                         .ask_fingerprint = [this](std::size_t i) { ask_fingerprint(i); },
                         .reassign = [this] { assign_ranks(); },
                         .launched =
                             [this] {
                               if (stall.enabled()) {
                                 stall.start(Clock::now());
                                 arm_stall_check();
                               }
                             },
                         .start_mpirun = [this] { start_observed_mpirun(); }});
  }

  // ---- --mpi with the ranks observed --------------------------------------------------------------
  // mpirun runs beside the loop, the agents staying to observe its ranks (they find them by their
  // marker); its end ends the job with its exit status. When something else ends the loop first (an
  // agent lost), run() waits for mpirun as it does without observation.

  std::optional<Child> mpirun_running;
  std::optional<int> mpirun_exit;
  boost::asio::steady_timer mpirun_timer{io};

  void start_observed_mpirun() {
    try {
      mpirun_running = start_mpirun(*launch->mpirun());
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      mpirun_exit = kExitCannotExecute;
      return end.shut_down();
    }
    watch_mpirun();
  }

  void watch_mpirun() {
    mpirun_timer.expires_after(milliseconds(200));
    mpirun_timer.async_wait([this](auto ec) {
      if (ec || !mpirun_running) return;
      const auto status = mpirun_running->try_wait();
      if (!status) return watch_mpirun();
      mpirun_exit = status->code;
      mpirun_running.reset();
      end.shut_down();
    });
  }

  // Runs the event loop to its end. An exception out of a handler (a timer's, a signal's) does not end
  // the job past its teardown: it fails the job in one line and the loop goes on to shut down; a
  // teardown that throws again is cut short (agents see their channels close and kill their ranks).
  void run_loop() {
    for (int failures = 0;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        const std::string line = user_message(e, teardown.activity());
        if (teardown.failure_reported() || teardown.tearing_down()) spdlog::error("{}", line);
        if (teardown.exit_code() == kExitOk) teardown.set_exit_code(kExitLaunchFailed);
        if (++failures > 2) return;
        if (teardown.tearing_down()) {
          if (teardown.phase() != Phase::kDone) end.finish();
        } else {
          fail_job(line);
        }
      }
    }
  }

  void make_agents() {
    agents = std::make_unique<JobAgents>(
        io, options, JobAgents::Job{plan, hosts, links, sync, secret, stall.enabled(), restarts, teardown, timings},
        JobAgents::Hooks{.make_links = [this](const std::vector<std::string>& names) { make_links(names); },
                         .assign_ranks = [this] { assign_ranks(); },
                         .start_failed =
                             [this](std::size_t i) {
                               links->mark_closed(i);
                               exits.mark_host_exited(i);
                             },
                         .ask_fingerprint = [this](std::size_t i) { ask_fingerprint(i); },
                         .all_up = [this] { launch->probe(); },
                         .arm_deadline = [this](milliseconds after,
                                                std::function<void()> f) { end.arm_deadline(after, std::move(f)); },
                         .fail = [this](const std::string& why) { fail_job(why); },
                         .shut_down = [this] { end.shut_down(); }});
    agents->start();
  }

  // Which host runs which rank, from the plan; every rank running.
  void assign_ranks() {
    exits = RankExits(plan.size());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const HostPlan& hp = plan.hosts()[hosts[i].plan_index];
      exits.assign(i, hp.first_rank, hp.local_size);
    }
  }

  // ---- the hang autopsy and --stall-timeout --------------------------------------------------------

  void arm_stall_check() {
    stall_timer.expires_after(std::max(stall.until_stalled(Clock::now()), milliseconds(100)));
    stall_timer.async_wait([this](auto ec) {
      if (ec || teardown.phase() != Phase::kRunning) return;
      if (!stall.stalled(Clock::now())) return arm_stall_check();
      end.carry_out(teardown.on_stall(), "no rank printed anything or used CPU for " + seconds_text(stall.timeout()) +
                                             " (--stall-timeout); collecting every rank's stack, then stopping all ranks");
    });
  }

  int ranks_on(std::size_t i) const { return hvrun::ranks_on(hosts[i], plan); }

  // Asks every agent still there for its ranks' stacks; the ranks are stopped with `grace` once all
  // have answered or kAutopsyTimeout has passed (HangAutopsy).
  void start_autopsy(milliseconds grace) {
    if (!teardown.begin_autopsy()) return end.stop_ranks(grace);
    std::vector<std::string> names, silent(hosts.size());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      names.push_back(hosts[i].name);
      if (links->closed(i) || ranks_on(i) == 0) continue;
      const HostPlan& hp = plan.hosts()[hosts[i].plan_index];
      std::vector<int> ranks(static_cast<std::size_t>(hp.local_size));
      for (int k = 0; k < hp.local_size; ++k) ranks[static_cast<std::size_t>(k)] = hp.first_rank + k;
      silent[i] = hosts[i].name + " (" + (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks) + ")";
    }
    autopsy.start(std::move(names), std::move(silent), exits.running(), grace);
  }

  // HangAutopsy's end (JobCore).
  void autopsy_over(milliseconds grace) { end.stop_ranks(grace); }

  // ---- events ------------------------------------------------------------------------------------

  void took_output() {
    if (timings.first_output == Clock::time_point{}) timings.first_output = Clock::now();
  }

  void check_rank_of(std::size_t i, int rank) const {
    if (!exits.runs_on(rank, i))
      throw ProtocolError(links->peer(i) + ": message about rank " + std::to_string(rank) +
                          ", which is not on that host");
  }

  void handle(std::size_t i, HelloMsg m) { agents->on_hello(i, std::move(m)); }

  void handle(std::size_t i, ReadyMsg m) { agents->on_ready(i, m); }
  void handle(std::size_t i, ProbeResultMsg m) { launch->on_probe_result(i, m); }
  void handle(std::size_t i, LinkTestResultMsg m) { launch->on_link_result(i, m); }

  void handle(std::size_t i, FingerprintMsg m) { launch->on_fingerprint(i, std::move(m)); }
  void handle(std::size_t i, HeartbeatMsg m) {
    if (teardown.phase() == Phase::kRunning) stall.heartbeat(ranks_on(i), m.cpu_ms, Clock::now());
  }

  void handle(std::size_t i, HorovodRendezvousReadyMsg m) { launch->on_rendezvous_ready(i, m); }
  void handle(std::size_t i, RestartReadyMsg m) { restarts.on_ready(i, m); }

  void handle(std::size_t i, StartedMsg m) {
    check_rank_of(i, m.rank);
    rank_started(i, m);
    log_of(LogSubsys::kRank).debug("rank {} on {} is pid {}", m.rank, hosts[i].name, m.pid);
  }

  void handle(std::size_t i, ExitedMsg m) {
    check_rank_of(i, m.rank);
    if (!exits.record(m.rank))
      throw ProtocolError(links->peer(i) + ": rank " + std::to_string(m.rank) + " exited twice");
    rank_exited(i, m);
    output->flush(m.rank);
    if (exit_failed(m) && teardown.phase() == Phase::kRunning) {
      if (restarts.left()) {
        output->drain(kReportDrainTimeout);
        log_report(LogLevel::warn, rank_failure_report(m, hosts[i].name, output->stderr_digest(m.rank),
                                                       output->last_stderr(m.rank), exits.running()));
        restarts.begin("rank " + std::to_string(m.rank) + " on " + hosts[i].name + " " + describe_exit(m));
      } else {
        report_rank_failure(i, m);
      }
    }
    if (exits.all_exited()) {
      timings.ranks_done = Clock::now();
      if (teardown.phase() == Phase::kRestarting) return restarts.relaunch();
      end.shut_down();
    }
  }

  // An agent that reports a fatal error started none of its ranks (it refuses the launch before the
  // first spawn), so none will report an exit: count them as ended, or stopping the other hosts' ranks
  // would wait out its deadline for confirmations that never come.
  void handle(std::size_t i, FatalMsg m) {
    fail_job(hosts[i].name + ": " + m.error);
    exits.mark_host_exited(i);
    if (exits.all_exited()) end.shut_down();
  }

  template <typename M>
  void handle(std::size_t i, M&&) {
    throw ProtocolError(links->peer(i) + ": unexpected control message");
  }

  void report_rank_failure(std::size_t i, const ExitedMsg& m) {
    teardown.record_failure(failed_rank_exit_code(m));
    record.event("failure", {{"why", "rank " + std::to_string(m.rank) + " on " + hosts[i].name + " " + describe_exit(m)},
                             {"rank", m.rank}, {"host", hosts[i].name}});
    // The rank's own output comes first; a reader that does not take it soon does not hold the report.
    output->drain(kReportDrainTimeout);
    log_report(LogLevel::err, rank_failure_report(m, hosts[i].name, output->stderr_digest(m.rank), output->last_stderr(m.rank),
                                                   exits.running()));
    if (restarts.enabled()) spdlog::error("no restart left: all {} of --max-restarts were used", restarts.max());
    end.stop_ranks(options.kill_grace);
  }

  void on_agent_closed(std::size_t i, const std::string& error) {
    Host& h = hosts[i];
    if (links->closed(i)) return;
    links->mark_closed(i);
    if (!h.life.ended()) h.life.lose();
    exits.mark_host_exited(i);
    autopsy.host_gone(i);
    if (teardown.tearing_down()) {
      // Its session is closed now, while the other hosts' agents are still ending, rather than all of
      // them one after another on this thread once the last has ended (31 hosts: 27 ms at the end of every
      // launch, docs/BENCHMARKS.md). Nothing reads it later: the shell time is on the host already.
      h.remote.reset();
      end.maybe_done();
      return;
    }
    const std::string why = "lost the agent on " + h.name + ": " + agent_loss_reason(h, error);
    if (restarts.enabled() && restarts.lose_host(i, why)) return;
    fail_job(why + (restarts.enabled() && teardown.phase() == Phase::kRunning && restarts.used() == restarts.max()
                        ? "; no restart left: all " + std::to_string(restarts.max()) + " of --max-restarts were used"
                        : ""));
    if (exits.all_exited()) end.shut_down();
  }

  // ---- teardown (the decisions: teardown.hpp) ------------------------------------------------------

  void fail_job(const std::string& why) {
    if (!teardown.tearing_down()) record.event("failure", {{"why", why}});
    end.carry_out(teardown.fail(), why);
  }

  void on_signal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (mpirun_running) {  // mpirun's to act on (run_mpirun's rule): its end ends the job
      if (!(sig == SIGINT && signal_from_terminal())) mpirun_running->signal(sig);
      return signals.async_wait([this](auto e, int s) { on_signal(e, s); });
    }
    const Teardown::Decision d = teardown.on_signal(sig);
    if (d.action == Teardown::Action::kDropOutput) {
      spdlog::warn("received {} while rank output was still being written; the rest is dropped", signal_name(sig));
      io.stop();
      return;
    }
    end.carry_out(d, "received " + signal_name(sig) + "; stopping all ranks" +
                         (d.action == Teardown::Action::kAutopsy ? ", once their stacks are in (a second " +
                                                                        signal_name(sig) + " stops them at once)"
                                                                  : ""));
    signals.async_wait([this](auto e, int s) { on_signal(e, s); });
  }

  void log_timings() const {
    const bool any_remote = std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return !h.is_local; });
    log_report(LogLevel::info,
               timings_text(timings, any_remote, launch->probes_sent(), Clock::now()));
    if (const auto shells = shell_times_text(hosts)) log_report(LogLevel::info, std::string(kHvrunLogPrefix) + "timings: " + *shells);
  }
};

Job::Job(LaunchOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Job::~Job() = default;
int Job::run() { return impl_->run(); }

}  // namespace hvrun

#include "launcher/job/job.hpp"

#include <signal.h>
#include <unistd.h>

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
#include "common/local_hostname.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/check/check_run.hpp"
#include "launcher/check/fingerprint_report.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/job/hang_autopsy.hpp"
#include "launcher/job/job_core.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/launch_timings.hpp"
#include "launcher/job/nic_discovery.hpp"
#include "launcher/job/rank_exits.hpp"
#include "launcher/job/rank_launch.hpp"
#include "launcher/job/restart_plan.hpp"
#include "launcher/job/stack_groups.hpp"
#include "launcher/job/stall_watch.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/ranks/dry_run.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/ranks/horovod_rendezvous_plan.hpp"
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

namespace {


}  // namespace

// The fixed job's policy over JobCore: one plan of ranks, the teardown state machine (Teardown) and,
// with --max-restarts, the restarts (RestartPlan).
struct Job::Impl : JobCore<Job::Impl> {
  using Host = JobHost;
  using Phase = Teardown::Phase;
  using JobCore::handle;

  explicit Impl(LaunchOptions o)
      : JobCore(std::move(o)),
        plan(options.hosts, options.np, options.no_oversubscribe),
        deadline(io),
        teardown(options.kill_grace),
        restarts(options.max_restarts, plan.size(), options.min_np) {}

  RankPlan plan;
  asio::steady_timer deadline;
  RankExits exits;
  std::unique_ptr<NicDiscovery> nics;  // from run() on
  using Clock = LaunchTimings::Clock;
  LaunchTimings timings;  // when each phase ended, for --verbose (log_timings)
  Teardown teardown;
  std::optional<std::string> horovod_rendezvous_addr;  // nothing when not served
  int horovod_rendezvous_port = 0;
  std::optional<std::vector<std::string>> mpirun;  // --mpi: the command line, once the NICs are chosen
  bool nics_decided = false;  // on_decided ran; it runs again when it waited for fingerprints
  std::string agreed;         // what every host's fingerprint agrees on, once compared without a difference
  // --max-restarts: the budget, the hosts lost since the first launch (parallel to plan.hosts(), as
  // RestartPlan::next wants them), the agents whose restart_ready is awaited (parallel to hosts), and
  // when the failure that began the restart under way came.
  RestartPlan restarts;
  std::vector<bool> gone;
  std::vector<bool> restart_awaited;
  Clock::time_point restart_since{};
  std::unique_ptr<AgentStartup> startup;  // last: its Connector goes first, so no late result reaches the job

  int run() {
    if (plan.oversubscribed() && !options.oversubscribe)
      spdlog::warn("-np {} exceeds the {} slots of the host list; hosts run more ranks than slots "
                   "(use --no-oversubscribe to make this an error)",
                   plan.size(), plan.total_slots());
    if (options.dry_run && !options.mpi) {
      print_dry_run(std::cout, plan, options, launcher_environment());
      return kExitOk;
    }
    nics = std::make_unique<NicDiscovery>(
        io, options, hosts, NicFilter::parse(options.network_interfaces),
        NicDiscovery::Hooks{
            .probing = [this] { return teardown.phase() == Phase::kProbing; },
            .arm_deadline = [this](milliseconds after, std::function<void()> f) { arm_deadline(after, std::move(f)); },
            .cancel_deadline = [this] { deadline.cancel(); },
            .send = [this](std::size_t i, const ProbeRequestMsg& m) { links->send(i, m); },
            .decided = [this] { on_decided(); }},
        probe_cache());
    make_output(plan.size(), false);
    if (!options.sync_dirs.empty()) {
      sync = std::make_unique<SyncRun>(
          io, sync_manifest(options.sync_dirs, options.sync_limit), hosts, options.start_timeout, options.check_only,
          !options.command.empty(),
          SyncRun::Hooks{.synced = [this](std::size_t i) { synced(i); },
                         .failed =
                             [this](std::size_t, const std::string& line) {
                               fail_job(line + "; check that host's disk and permissions, or copy the files there yourself");
                             },
                         .stopping = [this] { return teardown.tearing_down(); },
                         .may_draw = [this] { return teardown.phase() != Phase::kStarting; }});
      if (sync->manifest().files.empty())
        spdlog::warn("--sync: no files under {}; nothing to send", fold_names(options.sync_dirs));
    }
    start_agents();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    arm_deadline(options.start_timeout, [this] { on_start_timeout(); });
    run_loop();
    signals.cancel();
    reap_local_agents();
    log_timings();
    if (!mpirun || teardown.exit_code() != kExitOk) return ended(teardown.exit_code());
    if (options.dry_run) {
      std::cout << shell_line(*mpirun) << std::endl;
      return kExitOk;
    }
    return ended(run_mpirun(*mpirun));
  }

  // A job that failed drops its probe cache entry: a NIC that began to drop packets looks the same to
  // the cache's key, so the next launch must probe again rather than trust it.
  int ended(int exit_code) {
    if (exit_code == kExitOk || !nics) return exit_code;
    nics->forget_cached();
    if (const auto made = nics->cached_at())
      spdlog::warn("the NICs of this job came from the probe cache (probed {} before the launch); that entry is dropped, "
                   "so the next launch probes them again (--disable-cache probes every launch)",
                   seconds_text(std::chrono::duration_cast<milliseconds>(NicCache::Clock::now() - *made)));
    return exit_code;
  }

  // The probe cache a launch uses (--check-only only drops from it, nic_discovery.hpp): none under
  // --disable-cache (or HVRUN_DISABLE_CACHE=1) or without a home directory to keep it in.
  std::optional<NicCache> probe_cache() const {
    if (options.disable_cache) return std::nullopt;
    const auto dir = NicCache::default_dir();
    if (!dir) return std::nullopt;
    return NicCache(*dir);
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
          if (teardown.phase() != Phase::kDone) finish();
        } else {
          fail_job(line);
        }
      }
    }
  }

  // ---- start-up ----------------------------------------------------------------------------------

  void start_agents() {
    hosts = job_hosts(plan, kResolveTimeout);
    gone.assign(plan.hosts().size(), false);
    // A host that -np leaves without a rank gets no agent, so no restart may place ranks there.
    if (restarts.enabled() && hosts.size() < plan.hosts().size()) {
      std::vector<bool> unused(plan.hosts().size(), true);
      for (const Host& h : hosts) unused[h.plan_index] = false;
      plan = plan.without(unused, plan.size());
    }
    assign_ranks();
    std::vector<std::string> names;
    for (const Host& h : hosts) names.push_back(h.name);
    make_links(names);
    startup = std::make_unique<AgentStartup>(
        io, options, plan, hosts, timings.start,
        AgentStartup::Hooks{.starting = [this] { return teardown.phase() == Phase::kStarting; },
                            .attach = [this](std::size_t i, UniqueFd fd) { attach(i, std::move(fd)); },
                            // --start-timeout counts from the last host's turn to connect.
                            .turn = [this](std::size_t) { arm_deadline(options.start_timeout, [this] { on_start_timeout(); }); },
                            .failed =
                                [this](std::size_t i) {
                                  links->mark_closed(i);
                                  exits.mark_host_exited(i);
                                },
                            .connected = [this] { on_connected(); }});
    startup->start();
    links->start_heartbeats();
  }

  // Which host runs which rank, from the plan; every rank running.
  void assign_ranks() {
    exits = RankExits(plan.size());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const HostPlan& hp = plan.hosts()[hosts[i].plan_index];
      exits.assign(i, hp.first_rank, hp.local_size);
    }
  }

  std::vector<std::string> hosts_with_ranks() const {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (ranks_on(i) > 0) names.push_back(hosts[i].name);
    return names;
  }

  // TORCHELASTIC_RUN_ID: this launcher's job, the same in every attempt.
  std::string run_id() const { return "hvrun-" + local_hostname() + "-" + std::to_string(::getpid()); }

  // Every agent start has ended.
  void on_connected() {
    timings.connected = Clock::now();
    if (options.check_only) return maybe_probe();
    if (const auto failures = connect_failures(hosts)) fail_job(*failures);
  }

  // The host that runs rank 0 in the current plan (it serves the store and Horovod's rendezvous).
  std::size_t rank0_host() const {
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const HostPlan& hp = plan.hosts()[hosts[i].plan_index];
      if (hp.first_rank == 0 && hp.local_size > 0) return i;
    }
    return 0;
  }

  // Starts the conversation with the agent of hosts[i] over `fd`. What its ranks would run is asked in
  // the same breath (the agent answers after its `ready`): the slowest host's answer is what a launch
  // whose NICs are decided at once (the probe cache) waits for. A host that must first get --sync's files
  // is asked once it has them (synced).
  void attach(std::size_t i, UniqueFd fd) {
    const bool serves_store = rank0_host() == i;
    hosts[i].life.attach();
    links->attach(i, std::move(fd),
                  JobMsg{secret.hex(), static_cast<int>(options.heartbeat_timeout.count()), static_cast<int>(i),
                         serves_store, stall.enabled()});
    if (!needs_sync(i)) ask_fingerprint(i);
  }

  bool needs_sync(std::size_t i) const { return sync && sync->needs(hosts[i]); }

  // Probing starts when every host has either said hello or (under --check-only, which reports them)
  // failed to connect.
  void maybe_probe() {
    if (teardown.phase() != Phase::kStarting || !startup->all_up()) return;
    startup->clear_status();
    timings.agents_up = Clock::now();
    if (const auto twin = startup->same_host()) {
      teardown.record_failure(kExitUsage);
      spdlog::error("error: {}", *twin);
      return shut_down();
    }
    probe();
  }

  // ---- NIC discovery -----------------------------------------------------------------------------

  // Each host's candidate addresses are probed by its probers (probe_peers.hpp: a bounded set for a
  // launch, every other host for --check-only), all at once; then each host gets the NIC they all reached.
  void probe() {
    teardown.advance(Phase::kProbing);
    try {
      nics->start();
    } catch (const UsageError& e) {
      teardown.record_failure(kExitUsage);
      spdlog::error("error: {}", e.what());
      return shut_down();
    }
  }

  void handle(std::size_t i, ProbeResultMsg m) {
    if (teardown.phase() == Phase::kProbing) nics->add(i, m, links->peer(i));
  }

  // Every host that is up has its --sync files and has said what its ranks would run (or the job has
  // no command).
  bool fingerprints_in() const {
    return std::none_of(hosts.begin(), hosts.end(), [](const Host& h) { return h.life.settling(); });
  }

  // The hosts' fingerprints compared: differences are warned about; what would fail at once ends the
  // job before any rank starts (kExitUsage). False when the job must not go on.
  bool check_fingerprints() {
    if (options.command.empty()) return true;
    std::vector<HostFingerprint> prints;
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (hosts[i].fingerprint)
        prints.push_back({hosts[i].name, ranks_on(i),
                          sync && !hosts[i].is_local ? after_sync(*hosts[i].fingerprint, sync->manifest())
                                                      : *hosts[i].fingerprint});
    const FingerprintReport report = compare_fingerprints(prints, options.command, rank_cwd());
    for (const std::string& line : report.differences) spdlog::warn("hosts differ: {}", line);
    for (const std::string& line : report.refusals) spdlog::error("error: {}", line);
    if (report.refusals.empty() && report.differences.empty()) agreed = report.same;
    return report.refusals.empty();
  }

  void on_decided() {
    timings.decided = nics->decided_at();
    nics_decided = true;
    if (!fingerprints_in()) return await_fingerprints();
    deadline.cancel();
    const bool runnable = check_fingerprints();
    if (options.check_only) {
      report_check();
      if (!runnable) teardown.set_exit_code(kExitUsage);
      if (!agreed.empty() && !options.json) std::cout << "\nwhat the ranks would run, on every host: " << agreed << "\n";
      return;
    }
    if (!runnable) {
      teardown.record_failure(kExitUsage);
      return shut_down();
    }
    if (!nics->all_chosen()) {
      teardown.record_failure(kExitLaunchFailed);
      spdlog::error("{}", unusable_text(nic_report(), options.probe_timeout, nics->round()->attempts()));
      return shut_down();
    }
    // --mpi: mpirun's processes need no Gloo rendezvous.
    if (options.mpi) return prepare_mpirun();
    serve_horovod_rendezvous();
  }

  // Agents answer at once; the bound is for one whose interpreter hangs past kInterpreterTimeout, or
  // whose --sync check hashes for that long. A host whose --sync files are being copied is bounded by
  // its copy's own timeout (sync_timeout), so the wait goes on while one is.
  void await_fingerprints() {
    arm_deadline(options.start_timeout, [this] {
      if (std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return h.life.phase() == HostPhase::kSyncing; }))
        return await_fingerprints();
      std::vector<std::string> silent;
      for (const Host& h : hosts)
        if (h.life.settling()) silent.push_back(h.name);
      fail_job("no answer within " + seconds_text(options.start_timeout) + " from " + fold_names(silent) + " on " +
               (std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return h.life.syncing(); })
                    ? "which --sync files they lack"
                    : "what the ranks would run there") +
               "; check those hosts");
    });
  }

  // ---- --sync ------------------------------------------------------------------------------------



  // hosts[i] holds every --sync file (or, under --check-only, has said which it lacks): SyncRun::Hooks.
  void synced(std::size_t i) {
    ask_fingerprint(i);
    if (nics_decided && fingerprints_in()) on_decided();
  }

  // Horovod's client gives up after three refused tries, so its rendezvous must listen before any rank
  // starts: rank 0's agent starts it on its chosen NIC, and the launch waits for the port.
  void serve_horovod_rendezvous() {
    const std::size_t r0 = rank0_host();
    const NicChoice c = *nics->choice_of(r0);
    std::vector<std::vector<InterfaceInfo>> job_interfaces;
    for (const Host& h : hosts) job_interfaces.push_back(h.hello->interfaces);
    const auto p = plan_horovod_rendezvous(c.iface, c.address, hosts[r0].hello->interfaces, job_interfaces);
    if (!p) {
      spdlog::warn("{}'s NIC {} has no IPv4 address, and Horovod's Gloo rendezvous client speaks IPv4 only: "
                   "it is not served, so Horovod programs cannot start; choose a NIC with IPv4 "
                   "(--network-interface)", hosts[r0].name, c.iface);
      return launch();
    }
    horovod_rendezvous_addr = p->address;
    teardown.advance(Phase::kRendezvous);
    links->send(r0, HorovodRendezvousMsg{p->address, p->allowed_peers});
    arm_deadline(options.start_timeout, [this, r0] {
      fail_job("the agent on " + hosts[r0].name + " did not start Horovod's rendezvous within " +
               seconds_text(options.start_timeout) + "; raise --start-timeout or check that host");
    });
  }

  // --mpi: the agents' work ends with the choice; mpirun runs once they are gone (run()).
  void prepare_mpirun() {
    const MpirunInput in = mpirun_input_for(hosts, plan, *nics->round(), options);
    try {
      mpirun = mpirun_argv(in);
      spdlog::info("--mpi: {}", shell_line(*mpirun));
    } catch (const Error& e) {
      teardown.record_failure(kExitLaunchFailed);
      spdlog::error("{}", e.what());
    }
    shut_down();
  }

  // The --check-only report of the probe round as it stands.
  CheckReport nic_report() const { return check_report_of(hosts, nics->round(), nics->report_base()); }

  void report_check() {
    teardown.set_exit_code(print_check_report(nic_report(), options));
    teardown.mark_reported();
    shut_down();
  }

  void launch() {
    JobServices services{rank0_host(), secret.store_token(), horovod_rendezvous_addr, horovod_rendezvous_port, {}};
    if (restarts.enabled()) services.restarts = JobNetwork::Restarts{restarts.used(), restarts.max(), run_id()};
    const JobNetwork net = job_network(hosts, plan, *nics->round(), services);
    if (restarts.used() == 0) warn_about_user_environment(env(), *nics->round());
    if (restarts.used() > 0) {  // the failed attempt's exits are all in: the new plan's
      assign_ranks();
      for (int r = 0; r < plan.size(); ++r) output->restart(r);
    }
    for (std::size_t i = 0; i < hosts.size(); ++i)
      links->send(i, launch_message(hosts[i], plan, net, env(), options, rank_cwd()));  // none to a lost host
    teardown.advance(Phase::kRunning);
    deadline.cancel();
    if (restarts.used() > 0)
      spdlog::warn("restart {} of {}: {} ranks started again on {}, {} after the failure", restarts.used(),
                   restarts.max(), plan.size(), fold_names(hosts_with_ranks()),
                   seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - restart_since)));
    spdlog::info("started {} ranks on {} hosts", plan.size(), hosts.size());
    if (stall.enabled()) {
      stall.start(Clock::now());
      arm_stall_check();
    }
  }

  // ---- the hang autopsy and --stall-timeout --------------------------------------------------------

  void arm_stall_check() {
    stall_timer.expires_after(std::max(stall.until_stalled(Clock::now()), milliseconds(100)));
    stall_timer.async_wait([this](auto ec) {
      if (ec || teardown.phase() != Phase::kRunning) return;
      if (!stall.stalled(Clock::now())) return arm_stall_check();
      carry_out(teardown.on_stall(), "no rank printed anything or used CPU for " + seconds_text(stall.timeout()) +
                                         " (--stall-timeout); collecting every rank's stack, then stopping all ranks");
    });
  }

  int ranks_on(std::size_t i) const { return plan.hosts()[hosts[i].plan_index].local_size; }

  // Asks every agent still there for its ranks' stacks; the ranks are stopped with `grace` once all
  // have answered or kAutopsyTimeout has passed (HangAutopsy).
  void start_autopsy(milliseconds grace) {
    if (!teardown.begin_autopsy()) return stop_ranks(grace);
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
  void autopsy_over(milliseconds grace) { stop_ranks(grace); }

  // A host whose login shell still runs gets longer than --start-timeout (check_start).
  void on_start_timeout() {
    const StartCheck check = check_start(hosts, Clock::now(), options.start_timeout);
    if (check.give_up) return fail_job(*check.give_up);
    if (check.recheck > milliseconds(0)) arm_deadline(check.recheck, [this] { on_start_timeout(); });
  }

  // ---- events ------------------------------------------------------------------------------------

  void took_output() {
    if (timings.first_output == Clock::time_point{}) timings.first_output = Clock::now();
  }

  void check_rank_of(std::size_t i, int rank) const {
    if (!exits.runs_on(rank, i))
      throw ProtocolError(links->peer(i) + ": message about rank " + std::to_string(rank) +
                          ", which is not on that host");
  }

  void handle(std::size_t i, HelloMsg m) {
    startup->hello(i, std::move(m), links->peer(i));
    maybe_probe();
  }

  void handle(std::size_t i, ReadyMsg m) {
    accept_ready(hosts[i], m, needs_sync(i), !options.command.empty(), links->peer(i));
    // What the ranks would run there is learnt while the probes run (fingerprints_in): asked at attach,
    // or with --sync once that host has the files (this machine is their source).
    if (needs_sync(i)) links->send(i, sync->check());
    maybe_probe();
  }

  void handle(std::size_t i, FingerprintMsg m) {
    Host& h = hosts[i];
    if (h.life.phase() != HostPhase::kFingerprinting) throw ProtocolError(links->peer(i) + ": fingerprint out of turn");
    h.fingerprint = std::move(m);
    h.life.fingerprinted();
    // The job may have begun to end while it waited (a signal, a lost host): then nothing starts.
    if (nics_decided && fingerprints_in() && !teardown.tearing_down()) on_decided();
  }
  void handle(std::size_t i, HeartbeatMsg m) {
    if (teardown.phase() == Phase::kRunning) stall.heartbeat(ranks_on(i), m.cpu_ms, Clock::now());
  }

  void handle(std::size_t i, HorovodRendezvousReadyMsg m) {
    if (teardown.tearing_down()) return;  // the job failed meanwhile
    if (teardown.phase() != Phase::kRendezvous || i != rank0_host())
      throw ProtocolError(links->peer(i) + ": Horovod rendezvous ready out of turn");
    log_of(LogSubsys::kRendezvous)
        .info("Horovod's Gloo rendezvous is at {}:{} on {}", *horovod_rendezvous_addr, m.port, hosts[i].name);
    horovod_rendezvous_port = m.port;
    launch();
  }

  void handle(std::size_t i, StartedMsg m) {
    check_rank_of(i, m.rank);
    log_of(LogSubsys::kRank).debug("rank {} on {} is pid {}", m.rank, hosts[i].name, m.pid);
  }

  void handle(std::size_t i, ExitedMsg m) {
    check_rank_of(i, m.rank);
    if (!exits.record(m.rank))
      throw ProtocolError(links->peer(i) + ": rank " + std::to_string(m.rank) + " exited twice");
    output->flush(m.rank);
    if (exit_failed(m) && teardown.phase() == Phase::kRunning) {
      if (restarts.used() < restarts.max()) {
        output->drain(kReportDrainTimeout);
        log_report(LogLevel::warn, rank_failure_report(m, hosts[i].name, output->stderr_digest(m.rank),
                                                       output->last_stderr(m.rank), exits.running()));
        begin_restart("rank " + std::to_string(m.rank) + " on " + hosts[i].name + " " + describe_exit(m));
      } else {
        report_rank_failure(i, m);
      }
    }
    if (exits.all_exited()) {
      timings.ranks_done = Clock::now();
      if (teardown.phase() == Phase::kRestarting) return relaunch();
      shut_down();
    }
  }

  // An agent that reports a fatal error started none of its ranks (it refuses the launch before the
  // first spawn), so none will report an exit: count them as ended, or stopping the other hosts' ranks
  // would wait out its deadline for confirmations that never come.
  void handle(std::size_t i, FatalMsg m) {
    fail_job(hosts[i].name + ": " + m.error);
    exits.mark_host_exited(i);
    if (exits.all_exited()) shut_down();
  }

  template <typename M>
  void handle(std::size_t i, M&&) {
    throw ProtocolError(links->peer(i) + ": unexpected control message");
  }

  void report_rank_failure(std::size_t i, const ExitedMsg& m) {
    teardown.record_failure(failed_rank_exit_code(m));
    // The rank's own output comes first; a reader that does not take it soon does not hold the report.
    output->drain(kReportDrainTimeout);
    log_report(LogLevel::err, rank_failure_report(m, hosts[i].name, output->stderr_digest(m.rank), output->last_stderr(m.rank),
                                                   exits.running()));
    if (restarts.enabled()) spdlog::error("no restart left: all {} of --max-restarts were used", restarts.max());
    stop_ranks(options.kill_grace);
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
      maybe_done();
      return;
    }
    const std::string why = "lost the agent on " + h.name + ": " + agent_loss_reason(h, error);
    if (restarts.enabled() && lose_host(i, why)) return;
    fail_job(why + (restarts.enabled() && teardown.phase() == Phase::kRunning && restarts.used() == restarts.max()
                        ? "; no restart left: all " + std::to_string(restarts.max()) + " of --max-restarts were used"
                        : ""));
    if (exits.all_exited()) shut_down();
  }

  // ---- --max-restarts (the decisions: restart_plan.hpp) --------------------------------------------

  // --max-restarts: hosts[i] is gone while ranks run or are being stopped for a restart. True when the
  // job goes on without it (a restart begins, or goes on); false when it cannot (the caller fails it).
  bool lose_host(std::size_t i, const std::string& why) {
    const Phase phase = teardown.phase();
    if (phase != Phase::kRunning && phase != Phase::kRestarting) return false;
    if (phase == Phase::kRunning && restarts.used() == restarts.max()) return false;
    gone[hosts[i].plan_index] = true;
    const auto next = restarts.next(plan, gone, host_names());
    if (!next.plan) {
      fail_job(why + "; no restart: " + next.why_not);
      if (exits.all_exited()) shut_down();
      return true;
    }
    if (phase == Phase::kRestarting) {
      spdlog::warn("{}; the restart goes on without it", why);
      if (exits.all_exited()) relaunch();
    } else if (ranks_on(i) == 0) {
      spdlog::warn("{}; it ran no rank, so the job goes on without it", why);
    } else {
      begin_restart(why);
      if (exits.all_exited()) relaunch();
    }
    return true;
  }

  std::vector<std::string> host_names() const {
    std::vector<std::string> names(plan.hosts().size());
    for (const Host& h : hosts) names[h.plan_index] = h.name;
    return names;
  }

  // A rank failed or a host was lost while the ranks ran, and the budget has a restart left: every
  // rank stops, then relaunch() starts them again.
  void begin_restart(const std::string& why) {
    restarts.spend();
    teardown.restart();
    restart_since = Clock::now();
    spdlog::warn("{}: stopping all ranks to restart them (restart {} of {}, --max-restarts)", why, restarts.used(),
                 restarts.max());
    links->send_all(TerminateMsg{static_cast<int>(options.kill_grace.count()), {}});
    arm_deadline(options.kill_grace + kAfterKillSlack, [this] {
      std::vector<std::string> stuck;
      for (std::size_t i : exits.hosts_running()) stuck.push_back(hosts.at(i).name);
      fail_job(std::to_string(exits.running()) + " ranks on " + fold_names(stuck) + " did not end within " +
               seconds_text(options.kill_grace + kAfterKillSlack) +
               " of SIGTERM and SIGKILL, so they cannot be restarted; check those hosts for processes stuck in the "
               "kernel (state D in ps)");
    });
  }

  // Every rank of the failed attempt has ended: the next attempt's plan, then every agent left is
  // asked to prepare (RestartMsg); the launch follows their answers.
  void relaunch() {
    deadline.cancel();
    teardown.advance(Phase::kRelaunching);
    auto next = restarts.next(plan, gone, host_names());
    if (!next.plan) return fail_job("no restart: " + next.why_not);
    plan = std::move(*next.plan);
    horovod_rendezvous_addr.reset();
    horovod_rendezvous_port = 0;
    restart_awaited.assign(hosts.size(), false);
    const std::size_t r0 = rank0_host();
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (!links->closed(i)) {
        restart_awaited[i] = true;
        links->send(i, RestartMsg{restarts.used(), i == r0});
      }
    arm_deadline(options.start_timeout, [this] {
      std::vector<std::string> silent;
      for (std::size_t i = 0; i < hosts.size(); ++i)
        if (restart_awaited[i]) silent.push_back(hosts[i].name);
      fail_job("no answer within " + seconds_text(options.start_timeout) + " from " + fold_names(silent) +
               " to the restart; check those hosts");
    });
  }

  void handle(std::size_t i, RestartReadyMsg m) {
    if (teardown.tearing_down()) return;
    if (teardown.phase() != Phase::kRelaunching || !restart_awaited.at(i))
      throw ProtocolError(links->peer(i) + ": restart ready out of turn");
    restart_awaited[i] = false;
    // The attempt's MASTER_PORT and store, when rank 0 runs there.
    hosts[i].master_port = m.free_port;
    hosts[i].store_port = m.store_port;
    if (std::any_of(restart_awaited.begin(), restart_awaited.end(), [](bool b) { return b; })) return;
    deadline.cancel();
    serve_horovod_rendezvous();
  }

  // ---- teardown (the decisions: teardown.hpp) ------------------------------------------------------

  void fail_job(const std::string& why) { carry_out(teardown.fail(), why); }

  void on_signal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    const Teardown::Decision d = teardown.on_signal(sig);
    if (d.action == Teardown::Action::kDropOutput) {
      spdlog::warn("received {} while rank output was still being written; the rest is dropped", signal_name(sig));
      io.stop();
      return;
    }
    carry_out(d, "received " + signal_name(sig) + "; stopping all ranks" +
                     (d.action == Teardown::Action::kAutopsy ? ", once their stacks are in (a second " +
                                                                    signal_name(sig) + " stops them at once)"
                                                              : ""));
    signals.async_wait([this](auto e, int s) { on_signal(e, s); });
  }

  // `line`: the failure's report, printed when it is the first.
  void carry_out(const Teardown::Decision& d, const std::string& line) {
    if (d.report) {
      startup->clear_status();
      spdlog::error("{}", line);
    }
    if (d.action == Teardown::Action::kShutDown) shut_down();
    if (d.action == Teardown::Action::kAutopsy) start_autopsy(d.grace);
    if (d.action == Teardown::Action::kStopRanks) {
      // A second signal during the autopsy: the stacks that came are not waited for.
      autopsy.cancel();
      stop_ranks(d.grace);
    }
  }

  void stop_ranks(milliseconds grace) {
    if (!teardown.stop_ranks()) return;
    links->send_all(TerminateMsg{static_cast<int>(grace.count()), {}});
    arm_deadline(grace + kAfterKillSlack, [this] {
      spdlog::warn("some agents did not confirm that their ranks ended; closing their channels");
      shut_down();
    });
  }

  void shut_down() {
    if (!teardown.shut_down()) return;
    links->send_all(ShutdownMsg{});
    // A host still connecting is abandoned: its agent, if it comes, is dropped on arrival.
    links->abandon_unattached();
    arm_deadline(kShutdownTimeout, [this] { finish(); });
    maybe_done();
  }

  void maybe_done() {
    if (links->all_closed()) finish();
  }

  void finish() {
    teardown.finish();
    stall_timer.cancel();
    if (sync) sync->stop();
    autopsy.cancel();
    links->close_all();
    startup->stop();
    deadline.cancel();
    // Everything the ranks printed is written before hvrun exits, however slowly stdout is read; a
    // signal meanwhile (on_signal) gives up on it.
    output->notify_when_empty([this] { asio::post(io, [this] { io.stop(); }); });
  }

  void arm_deadline(milliseconds after, std::function<void()> on_expiry) {
    deadline.expires_after(after);
    deadline.async_wait([on_expiry = std::move(on_expiry)](auto ec) {
      if (!ec) on_expiry();
    });
  }

  void log_timings() const {
    const bool any_remote = std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return !h.is_local; });
    log_report(LogLevel::info,
               timings_text(timings, any_remote, nics->round() ? nics->round()->probes_sent() : 0, Clock::now()));
    if (const auto shells = shell_times_text(hosts)) log_report(LogLevel::info, std::string(kHvrunLogPrefix) + "timings: " + *shells);
  }
};

Job::Job(LaunchOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Job::~Job() = default;
int Job::run() { return impl_->run(); }

}  // namespace hvrun

#include "launcher/job/elastic_job.hpp"

#include <signal.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <optional>
#include <random>
#include <spdlog/spdlog.h>

#include "common/control_message.hpp"
#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/exit_status.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "launcher/base/exit_codes.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/elastic/discovery_script.hpp"
#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/elastic_phase.hpp"
#include "launcher/job/elastic_admission.hpp"
#include "launcher/job/elastic_rounds.hpp"
#include "launcher/job/elastic_workers.hpp"
#include "launcher/job/job_core.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/rank_exits.hpp"
#include "launcher/job/stack_groups.hpp"
#include "launcher/start/agent_startup.hpp"
#include "launcher/start/connect_progress.hpp"
#include "launcher/start/host_locality.hpp"

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kDiscoveryPeriod{1000};  // horovodrun's DISCOVER_HOSTS_FREQUENCY_SECS

using Phase = ElasticPhase::Phase;
using Event = ElasticPhase::Event;
using Action = ElasticPhase::Action;

}  // namespace

// Horovod's elastic rounds as a policy over JobCore: the event loop, the agents' messages handed to
// the parts, the hosts' losses, --stall-timeout, signals and the job's end. The parts: the hosts'
// admission (ElasticAdmission), the workers (ElasticWorkers) and the rounds (ElasticRounds), wired
// through their hooks; the driver's state machine (ElasticPhase) is shared by all of them.
struct ElasticJob::Impl : JobCore<ElasticJob::Impl> {
  using JobCore::handle;

  explicit Impl(LaunchOptions o)
      : JobCore(std::move(o)),
        el(*options.elastic),
        stop_timer(io),
        pool(el.cooldown, [] {
          static std::mt19937 gen{std::random_device{}()};
          return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
        }) {}

  const LaunchOptions::Elastic& el;
  asio::steady_timer stop_timer;  // the kill grace, then the shutdown's
  ElasticHosts pool;
  ElasticPhase phase;  // the state machine (elastic_phase.hpp): what each event does now
  bool discovered = false;  // the discovery script's first run is in
  int exit_code = kExitOk;
  std::unique_ptr<ElasticAdmission> admission;
  std::unique_ptr<ElasticWorkers> workers;
  std::unique_ptr<ElasticRounds> rounds;
  std::unique_ptr<DiscoveryLoop> discovery;  // last: its thread posts into io until it is gone

  int run() {
    rank_cwd();  // read once, before anything else can change it
    make_output(ElasticWorkers::kMaxWorkers, true);
    record_start("elastic", options.np);
    if (!options.sync_dirs.empty()) {
      sync = std::make_unique<SyncRun>(
          io, sync_manifest(options.sync_dirs, options.sync_limit), hosts, options.start_timeout, false,
          !options.command.empty(),
          SyncRun::Hooks{.synced = [this](std::size_t i) { admission->on_synced(i); },
                         .failed =
                             [this](std::size_t i, const std::string& line) {
                               admission->refuse(i, line + "; check that host's disk and permissions");
                               admission->maybe_probe();
                             },
                         .stopping = [this] { return phase.stopping(); },
                         .may_draw = [] { return true; }});
      if (sync->manifest().files.empty())
        spdlog::warn("--sync: no files under {}; nothing to send", fold_names(options.sync_dirs));
    }
    make_links({});
    make_parts();
    links->start_heartbeats();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    rounds->wait_for_slots("the job's first " + std::to_string(options.np) + " slots");
    if (el.discovery_script.empty()) {
      DiscoveryRun fixed;
      std::vector<std::string> names;
      for (const HostSpec& h : options.hosts) {
        fixed.hosts.push_back({h.name, h.slots});
        names.push_back(h.name);
      }
      const std::vector<bool> is_local = find_local_hosts(names, kResolveTimeout);
      for (std::size_t i = 0; i < names.size(); ++i) fixed.local[names[i]] = is_local[i];
      asio::post(io, [this, fixed = std::move(fixed)] { on_discovery(fixed); });
    } else {
      discovery = std::make_unique<DiscoveryLoop>(el.discovery_script, el.slots_per_host, kDiscoveryPeriod,
                                                  options.start_timeout, [this](DiscoveryRun r) {
                                                    asio::post(io, [this, r = std::move(r)] { on_discovery(r); });
                                                  });
    }
    run_loop();
    discovery.reset();
    signals.cancel();
    reap_local_agents();
    return record_end(exit_code);
  }

  // The admission (which starts the agents' connector), the workers and the rounds, wired together.
  void make_parts() {
    admission = std::make_unique<ElasticAdmission>(
        io, options, hosts, *links, pool, phase, sync.get(),
        ElasticAdmission::AgentTerms{secret.hex(), stall.enabled()},
        ElasticAdmission::Hooks{.host_set_changed = [this](HorovodHostUpdate u) { rounds->host_set_changed(u); },
                                .ask_fingerprint = [this](std::size_t i) { ask_fingerprint(i); },
                                .cwd = [this]() -> const std::string& { return rank_cwd(); },
                                .rendezvous = [this] { return rounds->rendezvous_hooks(); }});
    workers = std::make_unique<ElasticWorkers>(
        hosts, *links, *output, *admission,
        ElasticWorkers::Launch{options, [this]() -> const EnvPolicy& { return env(); },
                               [this]() -> const std::string& { return rank_cwd(); }});
    rounds = std::make_unique<ElasticRounds>(
        io, options, phase, pool, *admission, *workers, *links,
        ElasticRounds::Hooks{.fail = [this](const std::string& why) { fail_job(why); },
                             .succeeded =
                                 [this](const std::vector<ExitedMsg>& failed) {
                                   for (const ExitedMsg& e : failed)
                                     if (exit_code == kExitOk) exit_code = failed_rank_exit_code(e);
                                   stop_all(options.kill_grace);
                                 },
                             .started =
                                 [this] {
                                   if (stall.enabled()) {
                                     stall.start(Clock::now());
                                     arm_stall_check();
                                   }
                                 },
                             .world =
                                 [this](int ranks, const std::vector<std::string>& names, const std::string& why) {
                                   record.event("elastic_change", {{"np", ranks}, {"hosts", names}, {"why", why}});
                                 }});
  }

  void run_loop() {
    for (int failures = 0; failures < 3; ++failures) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("{}", user_message(e, "running the elastic job"));
        if (exit_code == kExitOk) exit_code = kExitLaunchFailed;
        if (!phase.stopping()) {
          stop_all(options.kill_grace);
        } else {
          finish();
        }
      }
    }
  }

  // ---- hosts ------------------------------------------------------------------------------------

  void on_discovery(const DiscoveryRun& r) {
    if (!r.error.empty()) {
      switch (phase.on(discovered ? Event::kDiscoveryFailed : Event::kFirstDiscoveryFailed)) {
        case Action::kFail: return fail_job("--host-discovery-script " + el.discovery_script + ": " + r.error);
        case Action::kWarn:
          spdlog::warn("--host-discovery-script {}: {}; the hosts stay as they were", el.discovery_script, r.error);
          return;
        default: return;
      }
    }
    if (phase.on(Event::kDiscovered) != Action::kAddHosts) return;
    discovered = true;
    const HorovodHostUpdate update = pool.update(r.hosts, Clock::now());
    for (const HostSlots& h : pool.available())
      if (!admission->listed(h.host)) {
        const auto local = r.local.find(h.host);
        admission->add_host(h.host, local != r.local.end() && local->second);
      }
    if (update != HorovodHostUpdate::kNoUpdate) rounds->host_set_changed(update);
  }

  // ---- the agents' messages -------------------------------------------------------------------------

  void check_rank_of(std::size_t i, int id) const { workers->check_rank_of(i, id); }

  void handle(std::size_t i, HelloMsg m) {
    greet(hosts[i], std::move(m), links->peer(i));
  }

  void handle(std::size_t i, ReadyMsg m) { admission->on_ready(i, m); }
  void handle(std::size_t i, ProbeResultMsg m) { admission->on_probe_result(i, m); }
  void handle(std::size_t i, KnockResultMsg m) { admission->on_knock_result(i, m); }
  void handle(std::size_t i, FingerprintMsg m) { admission->on_fingerprint(i, std::move(m)); }
  void handle(std::size_t i, LinkTestResultMsg m) { admission->on_link_result(i, m); }

  void handle(std::size_t i, StartedMsg m) {
    check_rank_of(i, m.rank);
    rank_started(i, m);
    log_of(LogSubsys::kRank).debug("worker {} on {} is pid {}", m.rank, hosts[i].name, m.pid);
  }

  void handle(std::size_t i, ExitedMsg m) {
    check_rank_of(i, m.rank);
    const SlotKey key = workers->exited(i, m.rank);
    rank_exited(i, m);
    const Action action = phase.on(Event::kWorkerExited);
    if (action == Action::kMaybeFinish) return maybe_finish();
    rounds->worker_ended(key, m, action == Action::kEndFormingRecord);
  }

  void handle(std::size_t i, FatalMsg m) {
    spdlog::error("{}: {}", hosts[i].name, m.error);
    links->close_channel(i);
    on_agent_closed(i, m.error);
  }

  void handle(std::size_t i, HeartbeatMsg m) {
    if (phase.started() && !phase.stopping())
      stall.heartbeat(static_cast<int>(workers->on(i).size()), m.cpu_ms, Clock::now());
  }

  // HangAutopsy's end (JobCore).
  void autopsy_over(milliseconds grace) { stop_all(grace); }

  // ---- --stall-timeout and the hang autopsy ---------------------------------------------------------

  void arm_stall_check() {
    stall_timer.expires_after(std::max(stall.until_stalled(Clock::now()), milliseconds(100)));
    stall_timer.async_wait([this](auto ec) {
      if (ec || phase.stopping() || autopsy.active()) return;
      // Between worlds, while no worker runs (waiting for hosts), nothing is expected to move.
      if (!workers->any_slot_held()) stall.start(Clock::now());
      if (!stall.stalled(Clock::now())) return arm_stall_check();
      spdlog::error("no rank printed anything or used CPU for {} (--stall-timeout); collecting every rank's stack, "
                    "then stopping all ranks",
                    seconds_text(stall.timeout()));
      if (exit_code == kExitOk) exit_code = kExitLaunchFailed;
      start_autopsy(options.kill_grace);
    });
  }

  // Asks every agent with workers for their stacks; the workers are stopped with `grace` once all have
  // answered or kAutopsyTimeout has passed (HangAutopsy), at once when none runs.
  void start_autopsy(milliseconds grace) {
    std::vector<std::string> names, silent(hosts.size());
    int n = 0;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      names.push_back(hosts[i].name);
      const std::vector<int> ids = workers->on(i);
      n += static_cast<int>(ids.size());
      if (!ids.empty() && links->live(i))
        silent[i] = hosts[i].name + " (" + (ids.size() == 1 ? "rank " : "ranks ") + rank_list(ids) + ")";
    }
    if (n == 0) return stop_all(grace);
    autopsy.start(std::move(names), std::move(silent), n, grace);
  }

  template <typename M>
  void handle(std::size_t i, M&&) {
    throw ProtocolError(links->peer(i) + ": unexpected control message");
  }

  void on_agent_closed(std::size_t i, const std::string& error) {
    if (links->closed(i)) return;
    links->mark_closed(i);
    autopsy.host_gone(i);
    const Action action = phase.on(Event::kAgentLost);
    if (action == Action::kPollClosed) return poll_closed();
    JobHost& h = hosts[i];
    if (h.life.ended()) return;  // refuse() shut it down; it ran no worker
    const bool was_starting = !h.life.ready() || h.life.settling();  // maybe_probe waited for it
    admission->lose(i);
    const std::vector<SlotKey> gone = workers->host_lost(i);
    if (action == Action::kMaybeFinish) return maybe_finish();
    spdlog::warn("{} lost ({}){}", h.name, agent_loss_reason(h, error),
                 gone.empty() ? std::string("; it ran no worker") : "; its " + std::to_string(gone.size()) + " workers count as failed");
    rounds->note_change("the loss of " + h.name);
    if (was_starting) admission->maybe_probe();
    rounds->workers_lost(h.name, gone, action == Action::kEndFormingRecord);
    if (!phase.stopping() && gone.empty()) {
      // Out for its cooldown like a host whose workers failed: a host whose agent keeps failing is not
      // started again at every discovery run (ElasticAdmission::listed).
      admission->blacklist(h.name);
      rounds->host_set_changed(HorovodHostUpdate::kRemoved);
    }
  }

  // ---- the end ----------------------------------------------------------------------------------

  void fail_job(const std::string& why) {
    if (phase.stopping()) return;
    record.event("failure", {{"why", why}});
    spdlog::error("{}", why);
    if (exit_code == kExitOk) exit_code = kExitLaunchFailed;
    stop_all(options.kill_grace);
  }

  void on_signal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (phase.on(Event::kSignal) == Action::kFinishNow) {
      spdlog::warn("received {} again; stopping at once", signal_name(sig));
      return finish();
    }
    signals.async_wait([this](auto e, int s) { on_signal(e, s); });
    if (autopsy.active()) {
      // A second signal during the autopsy: the stacks that came are not waited for.
      spdlog::warn("received {} again; stopping all workers at once", signal_name(sig));
      autopsy.cancel();
      return stop_all(milliseconds(0));
    }
    const bool any = workers->any_slot_held();
    spdlog::error("received {}; stopping all workers{}", signal_name(sig),
                  any ? ", once their stacks are in (a second " + signal_name(sig) + " stops them at once)" : "");
    exit_code = 128 + sig;
    start_autopsy(options.kill_grace);
  }

  void stop_all(milliseconds grace) {
    if (phase.stopping()) return;
    rounds->end_forming();
    phase.move_to(Phase::kStopping);
    rounds->stop();
    admission->stop();
    stall_timer.cancel();
    links->send_all(TerminateMsg{static_cast<int>(grace.count()), {}});
    stop_timer.expires_after(grace + kAfterKillSlack);
    stop_timer.async_wait([this](auto ec) {
      if (!ec) finish();
    });
    maybe_finish();
  }

  void maybe_finish() {
    if (workers->none_running()) finish();
  }

  void finish() {
    if (phase.phase() == Phase::kDone) return;
    phase.move_to(Phase::kDone);
    stop_timer.cancel();
    stall_timer.cancel();
    autopsy.cancel();
    if (sync) sync->stop();
    discovery.reset();
    links->send_all(ShutdownMsg{});
    links->abandon_unattached();
    admission->close();
    stop_timer.expires_after(kShutdownTimeout);
    stop_timer.async_wait([this](auto) { close_and_stop(); });
    poll_closed();
  }

  void poll_closed() {
    if (links->all_closed()) return close_and_stop();
  }

  void close_and_stop() {
    stop_timer.cancel();
    links->close_all();
    output->notify_when_empty([this] { asio::post(io, [this] { io.stop(); }); });
  }
};

ElasticJob::ElasticJob(LaunchOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
ElasticJob::~ElasticJob() = default;
int ElasticJob::run() { return impl_->run(); }

}  // namespace hvrun

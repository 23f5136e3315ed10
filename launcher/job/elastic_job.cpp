#include "launcher/job/elastic_job.hpp"

#include <signal.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <spdlog/spdlog.h>

#include "common/control_message.hpp"
#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/exit_status.hpp"
#include "common/heartbeat.hpp"
#include "common/horovod_rendezvous.hpp"
#include "common/job_secret.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "launcher/base/exit_codes.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/elastic/discovery_script.hpp"
#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/elastic_phase.hpp"
#include "launcher/elastic/worker_notifier.hpp"
#include "launcher/elastic/worker_registry.hpp"
#include "launcher/check/fingerprint_report.hpp"
#include "launcher/job/hang_autopsy.hpp"
#include "launcher/job/job_core.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/nic_discovery.hpp"
#include "launcher/job/rank_exits.hpp"
#include "launcher/job/rank_launch.hpp"
#include "launcher/job/stack_groups.hpp"
#include "launcher/job/stall_watch.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/ranks/rank_env.hpp"
#include "launcher/ranks/user_env.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/agent_startup.hpp"
#include "launcher/start/connect_progress.hpp"
#include "launcher/start/connector.hpp"
#include "launcher/start/host_locality.hpp"
#include "launcher/start/job_host.hpp"
#include "launcher/start/local_agent.hpp"

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kDiscoveryPeriod{1000};  // horovodrun's DISCOVER_HOSTS_FREQUENCY_SECS
constexpr milliseconds kNotifyTimeout{5000};
// After a worker of the round fails, how long the others get to re-initialise (each asks rank_and_size)
// before hvrun ends the round without those still silent (early_round_end).
constexpr milliseconds kLateGrace{2000};
// Worker numbers for output ("[N]<stdout>:") are handed out once each; a job that starts more workers
// than this in its life fails rather than growing the output tables without bound.
constexpr int kMaxWorkers = 4096;
constexpr const char* kUnassigned = "-1,-1,-1,-1,-1,-1";
// A newcomer's agent has this long to reach the rendezvous (KnockMsg): a connect and one small
// request, which a host that passed its probes does in milliseconds unless something drops them.
constexpr milliseconds kKnockTimeout{5000};
// How long the workers of the old world stay held (their rank_and_size unanswered) while the new world's
// new workers start and reach Gloo's rendezvous (forming, in activate()); then they are answered anyway.
// Python and torch's import take seconds on a loaded host.
constexpr milliseconds kFormingTimeout{60000};
// A worker still silent this long after its round ended without it (`late`) is killed and replaced by a
// fresh one on its slot. Such a worker is blocked in a collective: a recv from a peer that failed or reset
// does not wake when that peer's connection closes (Gloo's unbound buffers wait for their timeout,
// HOROVOD_GLOO_TIMEOUT_SECONDS, 30 s), while the others wait for it in the new world's rendezvous. Its
// state is a copy of the others' (elastic workers sync from rank 0 on each reset), so nothing is lost, and
// a fresh worker's start (Python, torch: seconds) is far shorter than the wait.
constexpr milliseconds kReplaceAfter{3000};
// A coordinator told of a host change while it re-initialises loses the notice: Horovod's
// State.on_reset() empties its queue of host updates after hvd.init(). While the usable hosts would still
// give another assignment than the world's, the notice is repeated this often (host_set_changed).
constexpr milliseconds kRenotifyPeriod{5000};

using SlotKey = std::pair<std::string, int>;  // (host as discovered, local rank)
using Phase = ElasticPhase::Phase;
using Event = ElasticPhase::Event;
using Action = ElasticPhase::Action;

std::string slot_text(const SlotKey& k) { return k.first + "[" + std::to_string(k.second) + "]"; }

}  // namespace

// Horovod's elastic rounds as a policy over JobCore: hosts discovered and admitted, worlds of workers
// that re-initialise, the rendezvous, and the driver's state machine (ElasticPhase).
struct ElasticJob::Impl : JobCore<ElasticJob::Impl> {
  using JobCore::handle;

  explicit Impl(LaunchOptions o)
      : JobCore(std::move(o)),
        el(*options.elastic),
        slots_timer(io),
        probe_timer(io),
        stop_timer(io),
        late_timer(io),
        forming_timer(io),
        replace_timer(io),
        renotify_timer(io),
        pool(el.cooldown, [] {
          static std::mt19937 gen{std::random_device{}()};
          return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
        }),
        registry(el.reset_limit),
        notifier(io) {}

  // One host the job has met, beside its JobHost (whose HostLife says whether it is admitted, knocking,
  // refused or lost): its NIC once admitted, and where its workers reach the rendezvous.
  struct Member {
    bool blacklisted = false;  // was blacklisted (refuse(), blacklist()): may return after its cooldown
    std::string knock_token;
    std::string knocked_from;  // the knock's source address, as the rendezvous saw it
    std::optional<NicChoice> nic;
    std::string rendezvous_addr;
    int rendezvous_port = 0;
  };
  struct Worker {
    std::size_t host = 0;
    int local_rank = 0;
    bool running = true;
  };

  const LaunchOptions::Elastic& el;
  asio::steady_timer slots_timer;  // --elastic-timeout while too few slots are there
  asio::steady_timer probe_timer;  // the probe round's deadline
  asio::steady_timer stop_timer;   // the kill grace, then the shutdown's
  asio::steady_timer late_timer;   // kLateGrace after a failure in the round
  asio::steady_timer forming_timer;  // kFormingTimeout while the new world forms
  asio::steady_timer replace_timer;  // kReplaceAfter once a round ended without silent workers
  asio::steady_timer renotify_timer;  // kRenotifyPeriod after each notice to the coordinator
  ElasticHosts pool;
  WorkerRegistry registry;
  WorkerNotifier notifier;
  std::vector<Member> members;  // parallel to hosts: every host met, in order
  std::map<std::string, std::size_t> index_of;
  std::unique_ptr<HorovodRendezvous> rendezvous;
  std::unique_ptr<NicDiscovery> probing;  // the admission round under way
  std::vector<std::size_t> probed;        // the newcomers it decides on
  std::vector<Worker> workers;            // index: the worker's number on the wire
  std::map<SlotKey, int> running;         // slot -> its running worker
  std::vector<SlotInfo> assignment;       // the current world; empty before the start
  std::map<SlotKey, HorovodWorkerAddresses> notification_addresses;
  std::vector<std::pair<SlotKey, std::function<void(std::string)>>> held;  // rank_and_size answers
  std::map<SlotKey, ExitedMsg> last_exit;
  // Slots whose round hvrun ended without them (early_round_end): their next rank_and_size is answered
  // at once from the assignment, not recorded.
  std::set<SlotKey> late;
  // Late slots whose worker hvrun killed to start a fresh one there (replace_silent); it starts when the
  // old one's exit arrives.
  std::set<SlotKey> replacing;
  // The ranks of replacement workers that have not yet begun Gloo's rendezvous.
  std::set<int> replacements;
  // The ranks of the new world's new workers that have not yet begun Gloo's rendezvous, while the old
  // world's workers are held for them (activate()); empty otherwise.
  std::set<int> forming;
  bool discovered = false;  // the discovery script's first run is in
  ElasticPhase phase;  // the state machine (elastic_phase.hpp): what each event does now
  int exit_code = kExitOk;
  std::optional<Clock::time_point> change_at;  // a loss or a join the workers are adjusting to
  std::string change_what;
  std::unique_ptr<Connector> connector;
  std::unique_ptr<DiscoveryLoop> discovery;  // last: its thread posts into io until it is gone

  int run() {
    rank_cwd();  // read once, before anything else can change it
    make_output(kMaxWorkers, true);
    if (!options.sync_dirs.empty()) {
      sync = std::make_unique<SyncRun>(
          io, sync_manifest(options.sync_dirs, options.sync_limit), hosts, options.start_timeout, false,
          !options.command.empty(),
          SyncRun::Hooks{.synced = [this](std::size_t i) { on_synced(i); },
                         .failed =
                             [this](std::size_t i, const std::string& line) {
                               refuse(i, line + "; check that host's disk and permissions");
                               maybe_probe();
                             },
                         .stopping = [this] { return phase.stopping(); },
                         .may_draw = [] { return true; }});
      if (sync->manifest().files.empty())
        spdlog::warn("--sync: no files under {}; nothing to send", fold_names(options.sync_dirs));
    }
    make_links({});
    connector = std::make_unique<Connector>(
        io, Connector::host_agent_starter(options, default_agent_path()),
        [this](std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
          on_connected(i, std::move(agent), error);
        },
        static_cast<std::size_t>(options.connect_concurrency));
    links->start_heartbeats();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    arm_slots_timer("the job's first " + std::to_string(options.np) + " slots");
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
    return exit_code;
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
      if (!index_of.contains(h.host) || gone_for_good(index_of.at(h.host))) {
        const auto local = r.local.find(h.host);
        add_host(h.host, local != r.local.end() && local->second);
      }
    if (update != HorovodHostUpdate::kNoUpdate) host_set_changed(update);
  }

  // hosts[i] was lost or left out, and its agent is gone: when the discovery script lists the host again
  // once its blacklisting is over (--blacklist-cooldown-range), it starts afresh (add_host), with a new
  // agent, new probes and a new knock, as horovodrun starts a returning host's workers afresh. A lost
  // host is blacklisted when its round ends; until then it stays out.
  bool gone_for_good(std::size_t i) const {
    const HostPhase p = hosts[i].life.phase();
    return (p == HostPhase::kLost || p == HostPhase::kRefused) && members[i].blacklisted && links->closed(i);
  }

  // `is_local`: the host is this machine (DiscoveryRun::local), so its agent runs here over pipes.
  void add_host(const std::string& name, bool is_local) {
    if (index_of.contains(name)) log_of(LogSubsys::kStart).info("{} is listed again; it starts afresh", name);
    JobHost h;
    h.name = name;
    h.is_local = is_local;
    const std::size_t i = links->add(name);
    index_of[name] = i;
    hosts.push_back(std::move(h));
    members.emplace_back();
    log_of(LogSubsys::kStart).info("{}: starting its agent", name);
    if (hosts[i].is_local) {
      hosts[i].local = std::make_unique<LocalAgent>(default_agent_path());
      attach(i, hosts[i].local->take_channel());
    } else {
      connector->connect(i, name);
    }
  }

  void attach(std::size_t i, UniqueFd fd) {
    hosts[i].life.attach();
    links->attach(i, std::move(fd),
                  JobMsg{secret.hex(), static_cast<int>(options.heartbeat_timeout.count()), static_cast<int>(i), false,
                         stall.enabled(), true});
  }

  void on_connected(std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
    JobHost& h = hosts[i];
    if (!error.empty()) h.life.fail_start();
    if (phase.stopping()) {
      if (error.empty()) h.life.lose();  // dropped unheard
      return;
    }
    if (!error.empty()) {
      h.connect_error = error;
      links->mark_closed(i);
      refuse(i, error);
      return maybe_probe();
    }
    h.remote = std::move(agent);
    attach(i, h.remote->take_channel());
  }

  // hosts[i] is never used: why, for the user, and the job goes on without it.
  void refuse(std::size_t i, const std::string& why) {
    hosts[i].life.refuse();
    // Its agent has nothing to do: it goes (on_agent_closed then says nothing), so that nothing idles on
    // the host, and a later return of the host starts afresh (gone_for_good).
    if (links->live(i)) links->send(i, ShutdownMsg{});
    spdlog::warn("{} is left out of the elastic job: {}; the job goes on without it", hosts[i].name, why);
    pool.blacklist(hosts[i].name, Clock::now());
    members[i].blacklisted = true;
    host_set_changed(HorovodHostUpdate::kRemoved);
  }

  // Newcomers that are up are probed together with the hosts already in, once no other host is still
  // starting its agent (so that a burst of new hosts is one round).
  void maybe_probe() {
    if (probing || phase.stopping()) return;
    std::vector<std::size_t> newcomers;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const HostLife& life = hosts[i].life;
      if ((!life.ready() && !life.ended()) || life.settling()) return;  // still starting
      if (life.phase() == HostPhase::kUp) newcomers.push_back(i);
    }
    if (newcomers.empty()) return;
    probed = newcomers;
    probing = std::make_unique<NicDiscovery>(
        io, options, hosts, NicFilter::parse(options.network_interfaces),
        NicDiscovery::Hooks{
            .probing = [this] { return probing != nullptr && !phase.stopping(); },
            .arm_deadline =
                [this](milliseconds after, std::function<void()> f) {
                  probe_timer.expires_after(after);
                  probe_timer.async_wait([f = std::move(f)](auto ec) {
                    if (!ec) f();
                  });
                },
            .cancel_deadline = [this] { probe_timer.cancel(); },
            .send = [this](std::size_t i, const ProbeRequestMsg& m) { links->send(i, m); },
            .decided = [this] { asio::post(io, [this] { on_probed(); }); }});
    try {
      probing->start();
    } catch (const UsageError& e) {
      probing.reset();
      for (std::size_t i : newcomers) refuse(i, e.what());
    }
  }

  void on_probed() {
    if (!probing) return;
    for (std::size_t i : probed) {
      if (hosts[i].life.phase() != HostPhase::kUp) continue;  // lost meanwhile
      const auto choice = probing->choice_of(i);
      if (!choice) {
        refuse(i, "none of its NICs reached the job's other hosts in the probes (hvrun --check-only -H " +
                      hosts[i].name + ",... shows why)");
        continue;
      }
      try {
        knock(i, *choice);
      } catch (const Error& e) {
        refuse(i, e.what());
      }
    }
    probing.reset();
    maybe_probe();  // hosts that came up during the round
  }

  // hosts[i] passed its probes: its NIC is fixed for the rest of the job. The rendezvous listens where
  // its workers reach the launcher (the address its sshd saw hvrun come from), and its agent knocks
  // there with a one-time token: the knock proves that the workers will get through, and shows the
  // source address their connections arrive from, which a NAT on the way rewrites. The rendezvous
  // answers only addresses knocked from (and loopback). Admission follows the knock's result.
  void knock(std::size_t i, const NicChoice& nic) {
    JobHost& h = hosts[i];
    std::string addr = h.is_local ? "127.0.0.1" : h.hello->ssh_client_address;
    if (addr.empty())
      throw Error("hvrun does not know its own address as " + h.name +
                  " sees it (no SSH_CONNECTION there: --rsh-agent?), so its workers could not reach the rendezvous");
    Member& m = members[i];
    if (!rendezvous) {
      HorovodElasticHooks hooks{
          .rank_and_size = [this](const std::string& host, int lr,
                                  std::function<void(std::string)> answer) { on_rank_and_size(host, lr, std::move(answer)); },
          .worker_addresses = [this](const std::string& host, int lr,
                                     HorovodWorkerAddresses a) { notification_addresses[{host, lr}] = std::move(a); },
          .global_rank_published = [this](int rank) { on_rank_published(rank); }};
      rendezvous = std::make_unique<HorovodRendezvous>(
          io, HorovodRendezvousOptions{addr, 0, {"127.0.0.1"}, {}, std::move(hooks)});
      m.rendezvous_port = rendezvous->port();
    } else {
      m.rendezvous_port = rendezvous->listen_also(io, addr);
    }
    m.rendezvous_addr = addr;
    m.nic = nic;
    m.knocked_from.clear();
    m.knock_token = HorovodRendezvous::new_knock_token();
    rendezvous->expect_knock(m.knock_token, [this, i](const std::string& from) { members[i].knocked_from = from; });
    links->send(i, KnockMsg{addr, m.rendezvous_port, m.knock_token, static_cast<int>(kKnockTimeout.count())});
    h.life.knock();
  }

  void handle(std::size_t i, KnockResultMsg r) {
    Member& m = members[i];
    if (hosts[i].life.phase() != HostPhase::kKnocking)
      throw ProtocolError(links->peer(i) + ": a knock result out of turn");
    rendezvous->forget_knock(m.knock_token);
    if (phase.stopping()) return;
    const std::string where = m.rendezvous_addr + ":" + std::to_string(m.rendezvous_port);
    if (!r.ok || m.knocked_from.empty()) {
      m.nic.reset();
      return refuse(i, "its workers could not reach hvrun's rendezvous at " + where + " (" +
                           (r.ok ? std::string("the knock did not arrive") : r.detail) + "): let " + hosts[i].name +
                           " connect to this machine's " + m.rendezvous_addr + " (a firewall here, or no route back)");
    }
    hosts[i].life.admit();
    log_of(LogSubsys::kStart)
        .info("admitted {}: it uses {} {}; its workers reach the rendezvous at {} from {}", hosts[i].name, m.nic->iface,
              m.nic->address, where, m.knocked_from);
    host_set_changed(HorovodHostUpdate::kAdded);
  }

  bool usable(const std::string& host) const {
    const auto it = index_of.find(host);
    if (it == index_of.end()) return false;
    return hosts[it->second].life.phase() == HostPhase::kAdmitted;
  }

  std::vector<HostSlots> usable_hosts() const {
    std::vector<HostSlots> out;
    for (const HostSlots& h : pool.available())
      if (usable(h.host)) out.push_back(h);
    return out;
  }

  static int slot_count(const std::vector<HostSlots>& hs) {
    int n = 0;
    for (const auto& h : hs) n += h.slots;
    return n;
  }

  // The set of usable hosts may have changed (discovery, an admission, a refusal, a blacklisting).
  void host_set_changed(HorovodHostUpdate update) {
    switch (phase.on(Event::kHostSetChanged)) {
      case Action::kMaybeStart: return maybe_start();
      case Action::kMaybeResume: return maybe_resume();
      case Action::kNotifyCoordinator: break;
      default: return;
    }
    const auto hs = usable_hosts();
    if (slot_count(hs) < el.min_np) return;  // Horovod's driver sends nothing then
    if (assign_slots(hs, el.max_np) == assignment) return;
    notify_coordinator(update);
  }

  // horovodrun's _notify_workers_host_changes: the coordinator (rank 0) hears of it, and its
  // state.commit() or check_host_updates() makes every worker reset.
  void notify_coordinator(HorovodHostUpdate update) {
    const auto coordinator = std::find_if(assignment.begin(), assignment.end(), [](const SlotInfo& s) { return s.rank == 0; });
    if (coordinator == assignment.end()) return;
    const SlotKey key{coordinator->host, coordinator->local_rank};
    const auto it = notification_addresses.find(key);
    if (it == notification_addresses.end()) {
      log_of(LogSubsys::kRendezvous).debug("{} has published no notification address yet; not told", slot_text(key));
      return;
    }
    if (!change_at) {
      change_at = Clock::now();
      change_what = "the host change";
    }
    renotify_timer.expires_after(kRenotifyPeriod);
    renotify_timer.async_wait([this, update](auto ec) {
      if (ec || assign_slots(usable_hosts(), el.max_np) == assignment) return;
      log_of(LogSubsys::kRendezvous).info("the hosts still differ from the world's: telling the coordinator again");
      host_set_changed(update);
    });
    notifier.notify(it->second, static_cast<long long>(std::time(nullptr)), update, kNotifyTimeout,
                    [key](WorkerNotice n) {
                      if (n.acked)
                        log_of(LogSubsys::kRendezvous).info("told the coordinator {} at {}", slot_text(key), n.address);
                      else
                        spdlog::warn("could not tell the coordinator {} that the hosts changed: {}; the workers "
                                     "learn it at their next reset",
                                     slot_text(key), n.detail);
                    });
  }

  // ---- rounds -------------------------------------------------------------------------------------

  void maybe_start() {
    if (phase.phase() != Phase::kWaiting) return;
    const auto hs = usable_hosts();
    if (slot_count(hs) < options.np) return;
    // Hosts still starting or being probed join first, unless the job is full without them.
    const bool busy = probing || std::any_of(hosts.begin(), hosts.end(), [](const JobHost& h) {
                        return h.life.starting() || h.life.settling() || h.life.phase() == HostPhase::kKnocking;
                      });
    if (busy && !(el.max_np && slot_count(hs) >= *el.max_np)) return;
    slots_timer.cancel();
    activate(hs);
    if (phase.stopping()) return;
    spdlog::warn("elastic: started {} ranks on {}", assignment.size(), fold_names(assignment_hosts(assignment)));
    if (stall.enabled()) {
      stall.start(Clock::now());
      arm_stall_check();
    }
  }

  void maybe_resume() {
    const auto hs = usable_hosts();
    if (slot_count(hs) < el.min_np) return;
    slots_timer.cancel();
    activate(hs);
  }

  static std::vector<std::string> assignment_hosts(const std::vector<SlotInfo>& a) {
    std::vector<std::string> names;
    for (const SlotInfo& s : a)
      if (names.empty() || names.back() != s.host) names.push_back(s.host);
    return names;
  }

  // driver.py _activate_workers: a new assignment, a new round, the held answers, and workers for the
  // slots that have none.
  void activate(const std::vector<HostSlots>& hs) {
    std::vector<SlotInfo> next = assign_slots(hs, el.max_np);
    const std::vector<std::string> before = assignment_hosts(assignment), after = assignment_hosts(next);
    if (!assignment.empty() && std::none_of(before.begin(), before.end(), [&](const std::string& h) {
          return std::find(after.begin(), after.end(), h) != after.end();
        }))
      return fail_job("no host of the last world is left (" + fold_names(before) +
                  "), so no worker can hand the training state on; the job cannot go on");
    const bool first = assignment.empty();
    end_forming();
    replacements.clear();
    renotify_timer.cancel();  // the change is in this world, or told again when the hosts change next
    phase.move_to(Phase::kOpen);
    assignment = std::move(next);
    registry.reset(static_cast<int>(assignment.size()));
    rendezvous->clear_keys();
    for (const std::string& h : after)
      if (!first && std::find(before.begin(), before.end(), h) == before.end())
        spdlog::warn("{} joined: {} ranks now", h, assignment.size());
    const std::vector<int> started_ranks = start_workers();
    if (phase.stopping()) return;
    // The old world's workers wait in rank_and_size. Answered now, they would begin Gloo's rendezvous at
    // once and wait there for the new workers, which are still starting (Python, torch: seconds); a new
    // host lost meanwhile would leave them stuck until Gloo's timeout (30 s), then aborting, and the job
    // with them (so under horovodrun). Held until every new worker has begun the rendezvous (forming),
    // they can still be given another world if one is lost: a failure during forming ends the round
    // (record_held_ready), and the next activation answers them.
    if (!held.empty() && !started_ranks.empty()) {
      forming.insert(started_ranks.begin(), started_ranks.end());
      phase.move_to(Phase::kForming);
      log_of(LogSubsys::kRendezvous)
          .info("holding the {} workers of the last world until the {} new ones reach the rendezvous", held.size(),
                forming.size());
      forming_timer.expires_after(kFormingTimeout);
      forming_timer.async_wait([this, round = registry.round()](auto ec) {
        if (ec || registry.round() != round || phase.on(Event::kFormingTimeout) != Action::kRelease) return;
        spdlog::warn("elastic: {} new workers ({}) did not reach the rendezvous within {}; the others go ahead and "
                     "wait for them in Gloo's rendezvous. Check those hosts' start-up: the program's imports, its "
                     "Python environment, a slow or full disk",
                     forming.size(), forming_slots_text(), seconds_text(kFormingTimeout));
        release_held();
      });
      return;
    }
    release_held();
  }

  // The new workers that have not begun the rendezvous, by slot ("host[local rank]").
  std::string forming_slots_text() const {
    std::vector<std::string> slots;
    for (const SlotInfo& s : assignment)
      if (forming.contains(s.rank)) slots.push_back(slot_text({s.host, s.local_rank}));
    return fold_names(slots);
  }

  // kForming -> kOpen (no more held for new workers); nothing in another phase.
  void end_forming() {
    forming.clear();
    forming_timer.cancel();
    if (phase.phase() == Phase::kForming) phase.move_to(Phase::kOpen);
  }

  // The new world's held answers go out (activate()).
  void release_held() {
    end_forming();
    auto answers = std::move(held);
    held.clear();
    for (auto& [key, answer] : answers) {
      late.erase(key);  // it was waiting, not silent
      answer(slot_of(key) ? slot_of(key)->response() : kUnassigned);
    }
    maybe_report_resumed();
  }

  void on_rank_published(int rank) {
    const Action action = phase.on(Event::kRankPublished);
    if (action == Action::kNoteReplacement && replacements.erase(rank) > 0 && replacements.empty())
      return maybe_report_resumed();
    if (action != Action::kReleaseIfLast || forming.erase(rank) == 0) return;
    log_of(LogSubsys::kRendezvous).debug("rank {} of the new world reached the rendezvous", rank);
    if (forming.empty()) release_held();
  }

  // A worker failed or its host was lost while the old world's workers were held for the new ones
  // (forming): the held ones count as READY in this round, which they are (waiting in rank_and_size),
  // so the failure can end the round at once; those of `failing_host` are left to the failure's own
  // record. Returns the round's end when that completed it.
  std::optional<RoundEnd> record_held_ready(const std::string& failing_host) {
    if (forming.empty()) return std::nullopt;
    end_forming();
    for (const auto& [key, answer] : held) {
      if (key.first == failing_host || !slot_of(key) || registry.has_recorded(key.first, key.second)) continue;
      if (auto end = registry.record(key.first, key.second, WorkerState::kReady, false)) return end;
    }
    return std::nullopt;
  }

  // Once every worker of the new world has its answer (or is new), the line that says the job goes on,
  // and how long after the change that began it.
  void maybe_report_resumed() {
    if (!change_at || !replacing.empty() || !replacements.empty()) return;
    if (std::any_of(assignment.begin(), assignment.end(),
                    [this](const SlotInfo& s) { return late.contains({s.host, s.local_rank}); }))
      return;
    spdlog::warn("elastic: {} ranks on {}, {} after {}", assignment.size(), fold_names(assignment_hosts(assignment)),
                 seconds_text(std::chrono::duration_cast<milliseconds>(Clock::now() - *change_at)), change_what);
    change_at.reset();
  }

  std::optional<SlotInfo> slot_of(const SlotKey& k) const {
    if (pool.blacklisted(k.first)) return std::nullopt;
    for (const SlotInfo& s : assignment)
      if (s.host == k.first && s.local_rank == k.second) return s;
    return std::nullopt;
  }

  // Workers for the assignment's slots that have none; returns their ranks.
  std::vector<int> start_workers() {
    std::map<std::size_t, std::vector<SlotInfo>> by_host;
    std::vector<int> started_ranks;
    for (const SlotInfo& s : assignment)
      if (!running.contains({s.host, s.local_rank})) by_host[index_of.at(s.host)].push_back(s);
    if (by_host.empty()) return started_ranks;
    JobNetwork net;
    net.hosts.resize(hosts.size());
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (members[i].nic) net.hosts[i] = HostNetwork{hosts[i].name, members[i].nic->iface, members[i].nic->address};
    const std::size_t coordinator = index_of.at(assignment.front().host);
    net.master_addr = members[coordinator].nic->address;
    net.master_port = hosts[coordinator].master_port;
    std::vector<std::string> node_order = assignment_hosts(assignment);
    for (auto& [i, slots] : by_host) {
      net.horovod_rendezvous_addr = members[i].rendezvous_addr;
      net.horovod_rendezvous_port = members[i].rendezvous_port;
      LaunchMsg m{rank_cwd(), options.command, hosts[i].is_local ? env().local() : env().remote(), {}};
      for (const SlotInfo& s : slots) {
        if (workers.size() >= static_cast<std::size_t>(kMaxWorkers)) {
          fail_job("the job started " + std::to_string(kMaxWorkers) + " workers in its life, hvrun's bound");
          return {};
        }
        const int id = static_cast<int>(workers.size());
        output->open_files(id);
        const int node = static_cast<int>(std::find(node_order.begin(), node_order.end(), s.host) - node_order.begin());
        auto rank_env = rank_environment(
            RankInfo{s.rank, s.size, s.local_rank, s.local_size, s.cross_rank, s.cross_size, static_cast<int>(i), node}, net);
        rank_env["HOROVOD_ELASTIC"] = "1";
        apply_user_variables(rank_env, env().user());
        m.ranks.push_back(RankLaunch{id, std::move(rank_env)});
        workers.push_back(Worker{i, s.local_rank, true});
        running[{s.host, s.local_rank}] = id;
        started_ranks.push_back(s.rank);
        log_of(LogSubsys::kRank).info("worker {} is {} (rank {} of {})", id, slot_text({s.host, s.local_rank}), s.rank, s.size);
      }
      links->send(i, m);
    }
    return started_ranks;
  }

  void on_rank_and_size(const std::string& host, int lr, std::function<void(std::string)> answer) {
    if (phase.on(Event::kRankAndSize) == Action::kAnswerUnassigned || !index_of.contains(host))
      return answer(kUnassigned);
    const bool out = pool.blacklisted(host);
    if (out || replacing.contains({host, lr})) return answer(kUnassigned);  // replacing: being killed
    if (late.erase({host, lr}) > 0) {
      const auto slot = slot_of({host, lr});
      log_of(LogSubsys::kRendezvous).info("{} re-initialises after its round ended; answered at once", slot_text({host, lr}));
      answer(slot ? slot->response() : kUnassigned);
      return maybe_report_resumed();
    }
    held.emplace_back(SlotKey{host, lr}, std::move(answer));
    log_of(LogSubsys::kRendezvous).debug("{} is ready ({} of {})", slot_text({host, lr}), registry.recorded() + 1, registry.size());
    if (auto end = registry.record(host, lr, WorkerState::kReady, out)) on_round_end(*end);
  }

  void on_round_end(const RoundEnd& end) {
    if (phase.on(Event::kRoundEnded) != Action::kEndRound) return;
    switch (end.kind) {
      case RoundEnd::Kind::kReset: {
        end_forming();  // the held answers go out with the next world
        for (const std::string& h : end.blacklist) blacklist(h);
        const auto hs = usable_hosts();
        if (slot_count(hs) < el.min_np) {
          phase.move_to(Phase::kResuming);
          spdlog::warn("elastic: {} slots left, --min-np is {}; waiting up to {} for more (--elastic-timeout)",
                       slot_count(hs), el.min_np, seconds_text(std::chrono::duration_cast<milliseconds>(el.timeout)));
          arm_slots_timer(std::to_string(el.min_np) + " slots (--min-np) after a reset");
          return;
        }
        return activate(hs);
      }
      case RoundEnd::Kind::kSucceeded:
        for (const auto& f : end.failed)
          if (const auto it = last_exit.find(f); it != last_exit.end() && exit_code == kExitOk)
            exit_code = failed_rank_exit_code(it->second);
        return stop_all(options.kill_grace);
      case RoundEnd::Kind::kAllBlacklisted:
        for (const std::string& h : end.blacklist) blacklist(h);
        return fail_job("elastic: " + end.why);
      default:
        return fail_job("elastic: " + end.why);
    }
  }

  // horovodrun: the host is out (for its cooldown) and its workers are stopped (the host event).
  void blacklist(const std::string& host) {
    pool.blacklist(host, Clock::now());
    members[index_of.at(host)].blacklisted = true;
    const auto until = pool.cooldown_end(host);
    spdlog::warn("{} blacklisted {}", host,
                 until ? "for " + seconds_text(std::chrono::duration_cast<milliseconds>(*until - Clock::now()))
                       : std::string("for the rest of the job (no --blacklist-cooldown-range)"));
    const std::size_t i = index_of.at(host);
    if (links->live(i)) links->send(i, TerminateMsg{static_cast<int>(options.kill_grace.count()), {}});
  }

  void arm_slots_timer(const std::string& what) {
    slots_timer.expires_after(el.timeout);
    slots_timer.async_wait([this, what](auto ec) {
      if (ec || phase.on(Event::kSlotsTimeout) != Action::kFail) return;
      const auto hs = usable_hosts();
      fail_job("timed out after " + seconds_text(std::chrono::duration_cast<milliseconds>(el.timeout)) +
           " (--elastic-timeout) waiting for " + what + ": " + std::to_string(slot_count(hs)) + " usable" +
           (hs.empty() ? "" : " on " + fold_names(assignment_hosts(assign_slots(hs, std::nullopt)))) +
           "; check the discovery script's output and the hosts' agents above");
    });
  }

  // ---- the agents' messages -------------------------------------------------------------------------

  void check_rank_of(std::size_t i, int id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= workers.size() || workers[static_cast<std::size_t>(id)].host != i)
      throw ProtocolError(links->peer(i) + ": message about worker " + std::to_string(id) + ", which is not on that host");
  }

  void handle(std::size_t i, HelloMsg m) {
    greet(hosts[i], std::move(m), links->peer(i));
  }

  void handle(std::size_t i, ReadyMsg m) {
    // Before its probes, a newcomer gets --sync's files and says what its workers would run (compared
    // with the hosts already in: handle(FingerprintMsg)), as a fixed job's hosts do before any rank starts.
    const bool needs_sync = sync && sync->needs(hosts[i]);
    accept_ready(hosts[i], m, needs_sync, !options.command.empty(), links->peer(i));
    if (needs_sync)
      links->send(i, sync->check());
    else
      ask_fingerprint(i);
    maybe_probe();
  }

  void handle(std::size_t i, ProbeResultMsg m) {
    if (probing) probing->add(i, m, links->peer(i));
  }

  void handle(std::size_t i, StartedMsg m) {
    check_rank_of(i, m.rank);
    log_of(LogSubsys::kRank).debug("worker {} on {} is pid {}", m.rank, hosts[i].name, m.pid);
  }

  void handle(std::size_t i, ExitedMsg m) {
    check_rank_of(i, m.rank);
    Worker& w = workers[static_cast<std::size_t>(m.rank)];
    if (!w.running) throw ProtocolError(links->peer(i) + ": worker " + std::to_string(m.rank) + " exited twice");
    w.running = false;
    output->flush(m.rank);
    const SlotKey key{hosts[i].name, w.local_rank};
    if (running[key] == m.rank) running.erase(key);
    const Action action = phase.on(Event::kWorkerExited);
    if (action == Action::kMaybeFinish) return maybe_finish();
    worker_ended(key, m, action == Action::kEndFormingRecord);
  }

  // driver.py _handle_worker_exit: only a worker whose slot is still assigned counts.
  // `forming_now`: the new world is forming (kEndFormingRecord).
  void worker_ended(const SlotKey& key, const ExitedMsg& m, bool forming_now) {
    if (replacing.erase(key) > 0) return start_replacement(key);
    if (!slot_of(key)) {
      log_of(LogSubsys::kRank).info("{} ended ({}) outside the assignment; ignored", slot_text(key), describe_exit(m));
      return;
    }
    const bool ok = !exit_failed(m);
    last_exit[key] = m;
    if (!ok) {
      spdlog::warn("worker {} on {} {}; its host will be blacklisted", slot_text(key), key.first, describe_exit(m));
      if (!change_at) {
        change_at = Clock::now();
        change_what = "the failure of " + slot_text(key);
      }
    }
    late.erase(key);
    if (!ok && forming_now)
      if (auto end = record_held_ready(key.first)) return on_round_end(*end);
    if (auto end = registry.record(key.first, key.second, ok ? WorkerState::kSuccess : WorkerState::kFailure, false))
      return on_round_end(*end);
    if (!ok) arm_late_timer();
  }

  // A worker failed and the round waits for the others to re-initialise. Those that talked to it learn
  // it at once; one blocked in a collective with a peer that is alive but resetting waits out Gloo's
  // timeout (30 s), and that peer waits in rank_and_size for it: under horovodrun the job stalls there.
  // hvrun ends the round kLateGrace after the failure instead, as if the silent workers had said READY:
  // the others get the new world, rebuild their Gloo contexts, and their old connections' closing wakes
  // the silent ones, whose rank_and_size is then answered at once (`late`). (A deviation from Horovod's
  // registry, which waits for every worker.)
  void arm_late_timer() {
    const int round = registry.round();
    late_timer.expires_after(kLateGrace);
    late_timer.async_wait([this, round](auto ec) {
      if (ec || registry.round() != round || phase.on(Event::kLateGraceOver) != Action::kEndRoundEarly) return;
      early_round_end();
    });
  }

  void early_round_end() {
    std::vector<SlotKey> silent;
    for (const SlotInfo& s : assignment)
      if (!registry.has_recorded(s.host, s.local_rank)) silent.push_back({s.host, s.local_rank});
    if (silent.empty()) return;
    log_of(LogSubsys::kRendezvous)
        .info("ending the round without {} still silent {} after a failure", silent.size(), seconds_text(kLateGrace));
    replace_timer.expires_after(kReplaceAfter);
    replace_timer.async_wait([this](auto ec) {
      if (!ec && phase.on(Event::kReplaceTimeout) == Action::kReplaceSilent) replace_silent();
    });
    for (const SlotKey& k : silent) {
      late.insert(k);
      if (auto end = registry.record(k.first, k.second, WorkerState::kReady, pool.blacklisted(k.first)))
        return on_round_end(*end);
    }
  }

  // The late workers that are still silent kReplaceAfter after their round ended (blocked until Gloo's
  // timeout) are killed; each one's exit starts a fresh worker on its slot (start_replacement).
  void replace_silent() {
    for (const SlotKey& k : late) {
      const auto it = running.find(k);
      const auto slot = slot_of(k);
      if (it == running.end() || !slot || replacing.contains(k)) continue;
      if (slot->rank == 0) {
        // The others sync their state from rank 0 on each reset (state.sync()): a fresh rank 0 would hand
        // them its initial state, losing the training's. Left to Gloo's timeout.
        log_of(LogSubsys::kRank).info("{} is silent, but rank 0 of the new world: left to Gloo's timeout", slot_text(k));
        continue;
      }
      const std::size_t host = workers[static_cast<std::size_t>(it->second)].host;
      if (!links->live(host)) continue;
      spdlog::warn("worker {} is still silent {} after the failure (blocked in a collective until Gloo's timeout, "
                   "HOROVOD_GLOO_TIMEOUT_SECONDS): replacing it with a fresh worker",
                   slot_text(k), seconds_text(kLateGrace + kReplaceAfter));
      replacing.insert(k);
      links->send(host, TerminateMsg{0, {it->second}});
    }
  }

  // A replaced worker has exited: a fresh one for its slot, if the slot is still assigned. It joins as a
  // newcomer does (its first hvd.init reads its rank from the environment); the others wait for it in
  // Gloo's rendezvous, or, while forming, stay held until it reaches it.
  void start_replacement(const SlotKey& key) {
    late.erase(key);
    // Waiting after a reset, the next activation starts a worker for each assigned slot without one.
    if (phase.phase() == Phase::kResuming) return;
    if (!slot_of(key)) return maybe_report_resumed();
    const std::vector<int> started_ranks = start_workers();
    if (phase.stopping()) return;
    log_of(LogSubsys::kRank).info("{} replaced: a fresh worker starts", slot_text(key));
    if (phase.phase() == Phase::kForming)
      forming.insert(started_ranks.begin(), started_ranks.end());
    else
      replacements.insert(started_ranks.begin(), started_ranks.end());
    maybe_report_resumed();
  }

  void handle(std::size_t i, FatalMsg m) {
    spdlog::error("{}: {}", hosts[i].name, m.error);
    links->close_channel(i);
    on_agent_closed(i, m.error);
  }

  void handle(std::size_t i, HeartbeatMsg m) {
    if (phase.started() && !phase.stopping())
      stall.heartbeat(static_cast<int>(workers_on(i).size()), m.cpu_ms, Clock::now());
  }

  // HangAutopsy's end (JobCore).
  void autopsy_over(milliseconds grace) { stop_all(grace); }

  // The numbers of the workers running on hosts[i].
  std::vector<int> workers_on(std::size_t i) const {
    std::vector<int> ids;
    for (std::size_t id = 0; id < workers.size(); ++id)
      if (workers[id].host == i && workers[id].running) ids.push_back(static_cast<int>(id));
    return ids;
  }

  // ---- a newcomer's checks, before its probes: --sync's files, then what its workers would run ------

  // hosts[i] holds every --sync file: SyncRun::Hooks.
  void on_synced(std::size_t i) {
    if (hosts[i].life.phase() == HostPhase::kFingerprinting) return ask_fingerprint(i);
    maybe_probe();
  }

  HostFingerprint print_of(std::size_t i) const {
    int slots = 0;
    for (const HostSlots& h : pool.available())
      if (h.host == hosts[i].name) slots = h.slots;
    const FingerprintMsg& f = *hosts[i].fingerprint;
    return {hosts[i].name, slots, sync && !hosts[i].is_local ? after_sync(f, sync->manifest()) : f};
  }

  // What would fail at once on hosts[i] refuses it, naming the path; how it differs from the hosts
  // already in (or checked before it) is named, as for a fixed job's hosts.
  void handle(std::size_t i, FingerprintMsg m) {
    JobHost& h = hosts[i];
    if (h.life.phase() != HostPhase::kFingerprinting) throw ProtocolError(links->peer(i) + ": fingerprint out of turn");
    h.fingerprint = std::move(m);
    h.life.fingerprinted();
    if (phase.stopping()) return;
    const FingerprintReport alone = compare_fingerprints({print_of(i)}, options.command, rank_cwd());
    if (!alone.refusals.empty()) {
      std::string why;
      for (const std::string& line : alone.refusals) why += (why.empty() ? "" : "; ") + line;
      refuse(i, why);
      return maybe_probe();
    }
    std::vector<HostFingerprint> prints;
    for (std::size_t k = 0; k < hosts.size(); ++k)
      if (k != i && hosts[k].fingerprint && !hosts[k].life.ended()) prints.push_back(print_of(k));
    if (!prints.empty()) {
      prints.push_back(print_of(i));
      for (const std::string& line : compare_fingerprints(prints, options.command, rank_cwd()).differences)
        spdlog::warn("hosts differ: {}", line);
    }
    maybe_probe();
  }

  // ---- --stall-timeout and the hang autopsy ---------------------------------------------------------

  void arm_stall_check() {
    stall_timer.expires_after(std::max(stall.until_stalled(Clock::now()), milliseconds(100)));
    stall_timer.async_wait([this](auto ec) {
      if (ec || phase.stopping() || autopsy.active()) return;
      // Between worlds, while no worker runs (waiting for hosts), nothing is expected to move.
      if (running.empty()) stall.start(Clock::now());
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
      const std::vector<int> ids = workers_on(i);
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
    if (h.life.phase() == HostPhase::kKnocking) rendezvous->forget_knock(members[i].knock_token);
    h.life.lose();
    std::vector<SlotKey> gone;
    for (std::size_t id = 0; id < workers.size(); ++id)
      if (workers[id].host == i && workers[id].running) {
        workers[id].running = false;
        output->flush(static_cast<int>(id));
        gone.push_back({h.name, workers[id].local_rank});
      }
    for (const auto& k : gone) running.erase(k);
    if (action == Action::kMaybeFinish) return maybe_finish();
    spdlog::warn("{} lost ({}){}", h.name, agent_loss_reason(h, error),
                 gone.empty() ? std::string("; it ran no worker") : "; its " + std::to_string(gone.size()) + " workers count as failed");
    if (!change_at) {
      change_at = Clock::now();
      change_what = "the loss of " + h.name;
    }
    if (was_starting) maybe_probe();
    if (!gone.empty() && action == Action::kEndFormingRecord)
      if (auto end = record_held_ready(h.name)) return on_round_end(*end);
    for (const auto& k : gone) {
      if (phase.stopping()) break;
      replacing.erase(k);
      if (!slot_of(k)) continue;
      late.erase(k);
      if (auto end = registry.record(k.first, k.second, WorkerState::kFailure, false)) {
        on_round_end(*end);
        break;
      }
      arm_late_timer();
    }
    if (!phase.stopping() && gone.empty()) {
      // Out for its cooldown like a host whose workers failed: a host whose agent keeps failing is not
      // started again at every discovery run (gone_for_good).
      blacklist(h.name);
      host_set_changed(HorovodHostUpdate::kRemoved);
    }
  }

  // ---- the end ----------------------------------------------------------------------------------

  void fail_job(const std::string& why) {
    if (phase.stopping()) return;
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
    const bool any = !running.empty();
    spdlog::error("received {}; stopping all workers{}", signal_name(sig),
                  any ? ", once their stacks are in (a second " + signal_name(sig) + " stops them at once)" : "");
    exit_code = 128 + sig;
    start_autopsy(options.kill_grace);
  }

  void stop_all(milliseconds grace) {
    if (phase.stopping()) return;
    end_forming();
    phase.move_to(Phase::kStopping);
    slots_timer.cancel();
    probe_timer.cancel();
    late_timer.cancel();
    replace_timer.cancel();
    renotify_timer.cancel();
    stall_timer.cancel();
    probing.reset();
    // Held rank_and_size requests stay unanswered: "-1,..." would make Horovod abort those workers with
    // a core dump's worth of output, while SIGTERM ends them quietly. The rendezvous closes at finish().
    held.clear();
    links->send_all(TerminateMsg{static_cast<int>(grace.count()), {}});
    stop_timer.expires_after(grace + kAfterKillSlack);
    stop_timer.async_wait([this](auto ec) {
      if (!ec) finish();
    });
    maybe_finish();
  }

  void maybe_finish() {
    if (std::none_of(workers.begin(), workers.end(), [](const Worker& w) { return w.running; })) finish();
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
    connector.reset();
    if (rendezvous) rendezvous->close();
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

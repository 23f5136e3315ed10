#include "launcher/job.hpp"

#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <algorithm>
#include <optional>
#include <spdlog/spdlog.h>

#include "agent/wire/control_message.hpp"
#include "agent/wire/error.hpp"
#include "agent/wire/duration_text.hpp"
#include "agent/wire/frame_channel.hpp"
#include "agent/wire/job_secret.hpp"
#include "agent/rank_process.hpp"
#include "hvrun/version.hpp"
#include "launcher/horovod_rendezvous_plan.hpp"
#include "launcher/host_locality.hpp"
#include "launcher/check_html.hpp"
#include "launcher/check_report.hpp"
#include "launcher/shell_quote.hpp"
#include "launcher/text_layout.hpp"
#include "launcher/local_agent.hpp"
#include "launcher/mpirun_command.hpp"
#include "launcher/mpirun_process.hpp"
#include "launcher/nic_filter.hpp"
#include "launcher/nic_selector.hpp"
#include "launcher/connector.hpp"
#include "launcher/dry_run.hpp"
#include "launcher/env_policy.hpp"
#include "launcher/probe_peers.hpp"
#include "launcher/probe_retry.hpp"
#include "launcher/probe_round.hpp"
#include "launcher/same_host.hpp"
#include "launcher/start_progress.hpp"
#include "launcher/status_line.hpp"
#include "launcher/user_env.hpp"
#include "agent/wire/interface_list.hpp"
#include "launcher/output_mux.hpp"
#include "launcher/rank_env.hpp"
#include "launcher/rank_plan.hpp"

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kResolveTimeout{5000};
// After SIGKILL, how long agents get to report their ranks' exits before hvrun stops waiting.
constexpr milliseconds kAfterKillSlack{1000};
constexpr milliseconds kShutdownTimeout{2000};
// How long a rank failure report waits for the rank output before it to be written.
constexpr milliseconds kReportDrainTimeout{500};
constexpr milliseconds kProbeSlack{2000};

std::string current_directory() {
  std::string buf(4096, '\0');
  if (::getcwd(buf.data(), buf.size()) == nullptr) throw_errno("getcwd", "the working directory for the ranks");
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

std::string describe_exit(const ExitedMsg& m) {
  if (!m.error.empty()) return m.error;
  if (m.signal != 0) return "killed by " + signal_name(m.signal);
  return "exited with code " + std::to_string(m.exit_code);
}

}  // namespace

struct Job::Impl {
  struct Host {
    std::size_t plan_index = 0;  // into RankPlan::hosts()
    std::string name;
    bool is_local = false;
    std::unique_ptr<LocalAgent> local;
    std::shared_ptr<HostAgent> remote;  // SSH, --rsh-agent
    std::string connect_error;   // why SSH or the agent start failed
    bool connecting = false;
    std::unique_ptr<FrameChannel> channel;
    std::optional<HelloMsg> hello;
    std::optional<ReadyMsg> ready;  // the agent has the job's secret and answers probes
    std::unique_ptr<asio::steady_timer> watchdog;
    bool closed = false;
    std::size_t to_ack = 0;  // output payload taken in and not yet acknowledged to the agent
  };
  struct RankState {
    std::size_t host = 0;  // into hosts
    bool exited = false;
  };
  // kRendezvous: NICs chosen, waiting for rank 0's agent to serve Horovod's rendezvous; no rank runs yet.
  enum class Phase { kStarting, kProbing, kRendezvous, kRunning, kStopping, kShuttingDown, kDone };

  explicit Impl(LaunchOptions o)
      : options(std::move(o)),
        plan(options.hosts, options.np, options.no_oversubscribe),
        signals(io, SIGINT, SIGTERM),
        deadline(io),
        heartbeat_timer(io),
        progress_timer(io),
        secret(JobSecret::generate()) {}

  LaunchOptions options;
  RankPlan plan;
  std::unique_ptr<StatusLine> status;
  asio::io_context io;
  asio::signal_set signals;
  asio::steady_timer deadline;
  asio::steady_timer heartbeat_timer;
  asio::steady_timer progress_timer;
  JobSecret secret;
  std::vector<Host> hosts;
  std::vector<RankState> ranks;
  std::unique_ptr<OutputMux> output;
  NicFilter filter;
  bool single_host = false;
  std::optional<ProbeRound> round;  // from probing on
  bool evaluation_pending = false;
  std::chrono::steady_clock::time_point probe_started;
  std::chrono::milliseconds probe_ms{0};
  // When each phase ended, for --verbose: where a launch spends its time.
  using Clock = std::chrono::steady_clock;
  Clock::time_point t_start = Clock::now(), t_connected, t_agents_up, t_decided, t_first_output, t_ranks_done;
  Phase phase = Phase::kStarting;
  int exit_code = kExitOk;
  bool failure_reported = false;
  int exited_count = 0;
  int interrupts = 0;
  bool congestion_noticed = false;
  std::string horovod_rendezvous_addr;  // empty when not served
  int horovod_rendezvous_port = 0;
  std::optional<std::vector<std::string>> mpirun;  // --mpi: the command line, once the NICs are chosen
  std::unique_ptr<Connector> connector;  // last: destroyed first, so no late result reaches the job

  int run() {
    if (plan.oversubscribed() && !options.oversubscribe)
      spdlog::warn("hvrun: -np {} exceeds the {} slots of the host list; hosts run more ranks than slots "
                   "(use --no-oversubscribe to make this an error)",
                   plan.size(), plan.total_slots());
    if (options.dry_run && !options.mpi) {
      print_dry_run(std::cout, plan, options, launcher_environment());
      return kExitOk;
    }
    filter = NicFilter::parse(options.network_interfaces);
    output = std::make_unique<OutputMux>(
        plan.size(), OutputOptions{options.output_filename, options.prefix_timestamp, 1, 2, 10},
        [this] { asio::post(io, [this] { acknowledge_all(); }); });
    start_agents();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    arm_deadline(options.start_timeout, [this] { on_start_timeout(); });
    run_loop();
    signals.cancel();
    for (auto& h : hosts)
      if (h.local) h.local->reap(kShutdownTimeout);
    log_timings();
    if (!mpirun || exit_code != kExitOk) return exit_code;
    if (options.dry_run) {
      std::cout << shell_line(*mpirun) << std::endl;
      return kExitOk;
    }
    return run_mpirun(*mpirun);
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
        const std::string line = user_message(e, activity());
        if (failure_reported || phase == Phase::kShuttingDown || phase == Phase::kDone)
          spdlog::error("hvrun: {}", line);
        if (exit_code == kExitOk) exit_code = kExitLaunchFailed;
        if (++failures > 2) return;
        if (phase == Phase::kShuttingDown || phase == Phase::kDone) {
          if (phase != Phase::kDone) finish();
        } else {
          fail_job(line);
        }
      }
    }
  }

  std::string activity() const {
    switch (phase) {
      case Phase::kStarting: return "starting the agents";
      case Phase::kProbing: return "probing the NICs";
      case Phase::kRendezvous: return "starting Horovod's rendezvous";
      case Phase::kRunning: return "supervising the ranks";
      case Phase::kStopping: return "stopping the ranks";
      case Phase::kShuttingDown:
      case Phase::kDone: return "shutting down the agents";
    }
    return "running the job";
  }

  // ---- start-up ----------------------------------------------------------------------------------

  void start_agents() {
    std::vector<std::string> names;
    for (const auto& hp : plan.hosts()) names.push_back(hp.host);
    const auto local = find_local_hosts(names, kResolveTimeout);

    ranks.resize(plan.size());
    for (std::size_t i = 0; i < plan.hosts().size(); ++i) {
      const HostPlan& hp = plan.hosts()[i];
      if (hp.local_size == 0) continue;
      Host h;
      h.plan_index = i;
      h.name = hp.host;
      h.is_local = local[i];
      for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r) ranks[r].host = hosts.size();
      hosts.push_back(std::move(h));
    }
    const bool any_remote = std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return !h.is_local; });
    if (any_remote) status = std::make_unique<StatusLine>(2);
    const std::string agent_path = default_agent_path();
    connector = std::make_unique<Connector>(
        io, Connector::host_agent_starter(options, agent_path),
        [this](std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
          on_connected(i, std::move(agent), error);
        });
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      Host& h = hosts[i];
      if (h.is_local) {
        h.local = std::make_unique<LocalAgent>(agent_path);
        attach(i, h.local->take_channel());
      } else {
        h.connecting = true;
        connector->connect(i, h.name);
      }
    }
    send_heartbeats();
    show_progress();
    if (status) tick_progress(kNamePendingAfter);
  }

  void on_connected(std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
    Host& h = hosts[i];
    h.connecting = false;
    if (!error.empty()) {
      h.connect_error = error;
      h.closed = true;
      mark_host_ranks_exited(h);
    } else {
      h.remote = std::move(agent);
      if (phase == Phase::kStarting) attach(i, h.remote->take_channel());
    }
    show_progress();
    if (phase != Phase::kStarting) return;
    if (std::any_of(hosts.begin(), hosts.end(), [](const Host& x) { return x.connecting; })) return;
    t_connected = Clock::now();
    if (options.check_only) return maybe_probe();
    report_connect_failures();
  }

  // All hosts are tried before anything is reported, so the report names every host that failed.
  void report_connect_failures() {
    std::string report;
    int failed = 0;
    for (const Host& h : hosts)
      if (!h.connect_error.empty()) {
        ++failed;
        report += "\n    " + h.connect_error;
      }
    if (failed == 0) return;
    fail_job("cannot start the job on " + std::to_string(failed) + " of " + std::to_string(hosts.size()) +
             " hosts:" + report);
  }

  void show_progress() {
    if (!status || phase != Phase::kStarting) return;
    StartProgress p;
    p.hosts = hosts.size();
    for (const Host& h : hosts) {
      if (!h.connecting && h.connect_error.empty()) ++p.connected;
      if (h.hello) ++p.agents_up;
      if (h.connect_error.empty() && !(h.hello && h.ready)) p.pending.push_back(h.name);
    }
    p.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - t_start);
    status->show(progress_text(p));
  }

  // Redraws the status line once a second from kNamePendingAfter on, so pending hosts get named even
  // when no event comes.
  void tick_progress(milliseconds after) {
    progress_timer.expires_after(after);
    progress_timer.async_wait([this](auto ec) {
      if (ec || phase != Phase::kStarting) return;
      show_progress();
      tick_progress(milliseconds(1000));
    });
  }

  // Starts the conversation with the agent of hosts[i] over `fd`.
  void attach(std::size_t i, UniqueFd fd) {
    Host& h = hosts[i];
    UniqueFd wfd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
    if (!wfd) throw_errno("fcntl(F_DUPFD_CLOEXEC)", "channel to the agent on " + h.name);
    h.channel = std::make_unique<FrameChannel>(io, std::move(fd), std::move(wfd), "agent on " + h.name);
    h.watchdog = std::make_unique<asio::steady_timer>(io);
    h.channel->start({
        .on_frame = [this, i](Frame&& f) { on_frame(i, std::move(f)); },
        .on_closed = [this, i](const std::string& error) { on_agent_closed(i, error); },
        .on_drained = {},
    });
    std::vector<std::string> names;
    for (const Host& other : hosts) names.push_back(other.name);
    const bool serves_store = !ranks.empty() && ranks[0].host == i;
    h.channel->send(FrameType::kControl, encode_control(JobMsg{secret.hex(),
                                                               static_cast<int>(options.heartbeat_timeout.count()),
                                                               static_cast<int>(i), names, serves_store}));
    rearm_watchdog(i);
  }

  // A host whose agent sends nothing for a heartbeat period is cut off or dead; its SSH connection
  // may still look open, so only silence tells.
  void rearm_watchdog(std::size_t i) {
    Host& h = hosts[i];
    h.watchdog->expires_after(options.heartbeat_timeout);
    h.watchdog->async_wait([this, i](auto ec) {
      if (ec || hosts[i].closed) return;
      hosts[i].channel->close();
      on_agent_closed(i, "no answer for " + seconds_text(options.heartbeat_timeout) +
                             " (host down or network cut?); raise --heartbeat-timeout if it is only slow");
    });
  }

  void send_heartbeats() {
    heartbeat_timer.expires_after(options.heartbeat_timeout / 4);
    heartbeat_timer.async_wait([this](auto ec) {
      if (ec || phase == Phase::kDone) return;
      for (Host& h : hosts)
        if (live(h)) h.channel->send(FrameType::kControl, encode_control(HeartbeatMsg{}));
      send_heartbeats();
    });
  }

  void on_hello(std::size_t i, HelloMsg m) {
    Host& h = hosts[i];
    if (h.hello) throw ProtocolError(h.channel->peer() + ": a second hello");
    if (m.version != kVersion)
      throw ProtocolError(h.channel->peer() + " is version " + m.version + ", hvrun is " + kVersion +
                          "; install the same hvrun version on every host");
    if (status) status->clear();
    spdlog::info("hvrun: agent on {} is up (hostname {}, pid {}{})", h.name, m.hostname, m.pid,
                 h.remote ? ", " + h.remote->agent_description() : std::string());
    h.hello = std::move(m);
    show_progress();
    maybe_probe();
  }

  // Probing starts when every host has either said hello or (under --check-only, which reports them)
  // failed to connect.
  void maybe_probe() {
    if (phase != Phase::kStarting) return;
    for (const auto& other : hosts)
      if (!(other.hello && other.ready) && (other.connecting || other.connect_error.empty())) return;
    if (status) status->clear();
    t_agents_up = Clock::now();
    if (const auto twin = same_host()) {
      exit_code = kExitUsage;
      failure_reported = true;
      spdlog::error("hvrun: error: {}", *twin);
      return shut_down();
    }
    probe();
  }

  // Two entries of one multi-host job that reach the same network stack (same_host.hpp). A job whose
  // every host is this machine is exempt: there loopback is the NIC and nothing is probed.
  std::optional<std::string> same_host() const {
    if (std::all_of(hosts.begin(), hosts.end(), [](const Host& h) { return h.is_local; })) return std::nullopt;
    std::vector<HostIdentity> ids;
    for (const Host& h : hosts)
      if (h.hello) ids.push_back(HostIdentity{h.name, plan.hosts()[h.plan_index].slots, h.hello->network_stack});
    return same_host_error(ids);
  }

  // ---- NIC discovery -----------------------------------------------------------------------------

  // Each host's candidate addresses are probed by its probers (probe_peers.hpp: a bounded set for a
  // launch, every other host for --check-only), all at once; then each host gets the NIC they all reached.
  void probe() {
    phase = Phase::kProbing;
    // Only hosts with an agent take part; under --check-only the others are reported as SSH failures.
    std::vector<std::size_t> members;
    std::vector<HostInventory> inventories;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      if (!hosts[i].hello || !hosts[i].ready) continue;
      members.push_back(i);
      inventories.push_back(HostInventory{hosts[i].name, hosts[i].hello->hostname, hosts[i].hello->interfaces});
    }
    // Every host in the list is this machine (`-H localhost:2,127.0.0.1:2`): loopback is the NIC.
    single_host = std::all_of(hosts.begin(), hosts.end(), [](const Host& h) { return h.is_local; });
    const std::size_t peers = probe_peer_count(options.probe_peers, options.check_only);
    try {
      round.emplace(std::move(members), std::move(inventories), filter, single_host, peers, !options.check_only);
    } catch (const UsageError& e) {
      exit_code = kExitUsage;
      failure_reported = true;
      spdlog::error("hvrun: error: {}", e.what());
      return shut_down();
    }
    probe_started = std::chrono::steady_clock::now();
    spdlog::info("hvrun: probing {} addresses of {} hosts ({})", round->planned().size(), hosts.size(),
                 peers == 0 || round->members().size() <= peers + 1
                     ? std::string("every pair")
                     : "each host from " + std::to_string(peers) + "+ peers");
    send_probes(round->planned(), options.probe_timeout);
    if (round->planned().empty()) decide();
  }

  // Sends each prober its share of `probes`, in the order given.
  void send_probes(const std::vector<ProbeRound::Probe>& probes, milliseconds timeout) {
    const auto& members = round->members();
    std::vector<ProbeRequestMsg> requests(members.size());
    for (const auto& [m, ti] : probes) {
      const ProbeTarget& t = round->targets()[ti];
      const Host& peer = hosts[members[t.host]];
      requests[m].targets.push_back(
          ProbeAddress{static_cast<int>(members[t.host]), t.iface, t.address, peer.hello->probe_port});
    }
    for (std::size_t m = 0; m < members.size(); ++m) {
      requests[m].timeout_ms = static_cast<int>(timeout.count());
      if (!requests[m].targets.empty())
        hosts[members[m]].channel->send(FrameType::kControl, encode_control(requests[m]));
    }
    // Probes end by themselves within the timeout; the slack covers agents that are slow to say so.
    arm_deadline(timeout + kProbeSlack, [this] { decide(); });
  }

  void handle(std::size_t i, ProbeResultMsg m) {
    if (phase != Phase::kProbing) return;
    if (m.host < 0 || static_cast<std::size_t>(m.host) >= hosts.size())
      throw ProtocolError(hosts[i].channel->peer() + ": probe result for an unknown host");
    ProbeResult r;
    r.from = member_of(i);
    r.to = member_of(static_cast<std::size_t>(m.host));
    r.iface = m.iface;
    r.address = m.address;
    r.outcome = outcome_of(m.outcome, hosts[i].channel->peer());
    if (m.answered_as >= 0 && static_cast<std::size_t>(m.answered_as) < hosts.size())
      r.answered_as = hosts[static_cast<std::size_t>(m.answered_as)].name;
    r.elapsed = std::chrono::milliseconds(m.elapsed_ms);
    if (round->add(std::move(r))) return decide();
    if (!options.check_only && !evaluation_pending) {
      // Results come in bursts; judge once per burst.
      evaluation_pending = true;
      asio::post(io, [this] {
        evaluation_pending = false;
        if (phase == Phase::kProbing && round->decision_is_final()) decide();
      });
    }
  }

  std::size_t member_of(std::size_t host) const {
    const auto m = round->member_of(host);
    if (!m) throw ProtocolError(hosts[host].name + ": probe result about a host without an agent");
    return *m;
  }

  // The selection of hosts[i] (a host without an agent has none).
  std::optional<NicChoice> choice_of(std::size_t i) const { return round ? round->choice_of(i) : std::nullopt; }

  static ProbeOutcome outcome_of(const std::string& word, const std::string& peer) {
    for (ProbeOutcome o : {ProbeOutcome::kOk, ProbeOutcome::kRefused, ProbeOutcome::kTimeout,
                           ProbeOutcome::kUnreachable, ProbeOutcome::kWrongHost, ProbeOutcome::kAuthFailed})
      if (word == to_string(o)) return o;
    throw ProtocolError(peer + ": unknown probe outcome '" + word + "'");
  }

  void decide() {
    if (phase != Phase::kProbing) return;
    deadline.cancel();
    round->decide();
    // A probe is not a verdict: probes that timed out towards a host without a usable NIC go again
    // (probe_retry.hpp), each attempt with a longer timeout.
    if (const auto again = round->retry(); !again.empty()) {
      const milliseconds timeout = attempt_timeout(options.probe_timeout, round->attempts());
      spdlog::info("hvrun: probing {} addresses again (attempt {} of {}, timeout {})", again.size(),
                   round->attempts(), kMaxProbeAttempts, seconds_text(timeout));
      return send_probes(again, timeout);
    }
    t_decided = Clock::now();
    probe_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t_decided - probe_started);
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (auto c = choice_of(i)) spdlog::info("hvrun: {} uses {} {} ({})", hosts[i].name, c->iface, c->address, c->why);
    if (options.check_only) return report_check();
    bool all = true;
    for (std::size_t i = 0; i < hosts.size(); ++i) all = all && choice_of(i).has_value();
    if (!all) {
      failure_reported = true;
      exit_code = kExitLaunchFailed;
      std::string why = report().why_unusable();
      while (!why.empty() && why.back() == '\n') why.pop_back();
      spdlog::error("hvrun: {}\nhvrun: gave up after {}", why, attempts_text(options.probe_timeout, round->attempts()));
      return shut_down();
    }
    // --mpi: mpirun's processes need no Gloo rendezvous.
    if (options.mpi) return prepare_mpirun();
    serve_horovod_rendezvous();
  }

  // Horovod's client gives up after three refused tries, so its rendezvous must listen before any rank
  // starts: rank 0's agent starts it on its chosen NIC, and the launch waits for the port.
  void serve_horovod_rendezvous() {
    const std::size_t r0 = ranks.at(0).host;
    const NicChoice c = *choice_of(r0);
    std::vector<std::vector<InterfaceInfo>> job_interfaces;
    for (const Host& h : hosts) job_interfaces.push_back(h.hello->interfaces);
    const auto p = plan_horovod_rendezvous(c.iface, c.address, hosts[r0].hello->interfaces, job_interfaces);
    if (!p) {
      spdlog::warn("hvrun: {}'s NIC {} has no IPv4 address, and Horovod's Gloo rendezvous client speaks IPv4 only: "
                   "it is not served, so Horovod programs cannot start; choose a NIC with IPv4 "
                   "(--network-interface)", hosts[r0].name, c.iface);
      return launch();
    }
    horovod_rendezvous_addr = p->address;
    phase = Phase::kRendezvous;
    hosts[r0].channel->send(FrameType::kControl, encode_control(HorovodRendezvousMsg{p->address, p->allowed_peers}));
    arm_deadline(options.start_timeout, [this, r0] {
      fail_job("the agent on " + hosts[r0].name + " did not start Horovod's rendezvous within " +
               seconds_text(options.start_timeout) + "; raise --start-timeout or check that host");
    });
  }

  // --mpi: the agents' work ends with the choice; mpirun runs once they are gone (run()).
  void prepare_mpirun() {
    MpirunInput in = mpirun_input(options);
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const NicChoice c = *choice_of(i);
      in.hosts.push_back({hosts[i].name, plan.hosts()[hosts[i].plan_index].local_size, c.iface, c.address});
    }
    in.shared_subnet = shared_ipv4_subnet(round->inventories(), round->selections());
    in.known_hosts = known_hosts_for_mpirun();
    in.forwarded = EnvPolicy(launcher_environment(), options).forwarded_names();
    try {
      mpirun = mpirun_argv(in);
      spdlog::info("hvrun: --mpi: {}", shell_line(*mpirun));
    } catch (const Error& e) {
      failure_reported = true;
      exit_code = kExitLaunchFailed;
      spdlog::error("hvrun: {}", e.what());
    }
    shut_down();
  }

  CheckReport report() const {
    CheckInput in;
    in.probe_time = probe_ms;
    in.filter = filter;
    in.single_host = single_host;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const Host& h = hosts[i];
      HostCheck c;
      c.host = h.name;
      if (!h.connect_error.empty()) c.ssh_error = h.connect_error;
      if (h.hello) {
        c.agent_version = h.hello->version;
        c.interfaces = h.hello->interfaces;
      }
      if (const auto m = round ? round->member_of(i) : std::nullopt; m && *m < round->selections().size())
        c.selection = round->selections()[*m];
      in.hosts.push_back(std::move(c));
    }
    return CheckReport(std::move(in));
  }

  void report_check() {
    const CheckReport r = report();
    exit_code = r.exit_code();
    if (!options.report_file.empty()) {
      try {
        write_report_file(options.report_file, r.html());
      } catch (const Error& e) {
        spdlog::error("hvrun: {}", e.what());
        exit_code = kExitLaunchFailed;
      }
    }
    const std::size_t width = terminal_width(1);
    write_fully(1, options.json      ? r.json() + "\n"
                   : options.matrix  ? r.matrix(::isatty(1) == 1, width)
                   : options.verbose ? r.listing()
                                     : r.summary(width));
    failure_reported = true;
    shut_down();
  }

  // Each host's rank contract carries its own host's chosen NIC.
  JobNetwork network() const {
    JobNetwork net;
    net.hosts.resize(plan.hosts().size());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      HostNetwork& n = net.hosts[hosts[i].plan_index];
      n.hostname = hosts[i].hello->hostname;
      const NicChoice c = *choice_of(i);
      n.iface = c.iface;
      n.address = c.address;
    }
    const Host& first = hosts.at(ranks.at(0).host);
    net.master_addr = net.hosts[first.plan_index].address;
    net.master_port = first.hello->free_port;
    // The store is served by rank 0's agent, on every address; ranks use the verified one.
    net.store_addr = net.master_addr;
    net.store_port = first.ready->store_port;
    net.store_token = secret.store_token();
    net.horovod_rendezvous_addr = horovod_rendezvous_addr;
    net.horovod_rendezvous_port = horovod_rendezvous_port;
    return net;
  }

  void launch() {
    const JobNetwork net = network();
    const EnvPolicy env(launcher_environment(), options);
    for (const std::string& name : env.unset())
      spdlog::warn("hvrun: -x {}: not set in hvrun's environment, so not passed to the ranks", name);
    const std::string cwd = current_directory();
    const auto& user = env.user();
    std::vector<std::string> names;
    for (const HostInventory& inv : round->inventories()) names.push_back(inv.host);
    if (const std::string line = user_nic_contradictions(user, names, round->selections()); !line.empty())
      spdlog::warn("hvrun: {}", line);
    for (Host& h : hosts) {
      const HostPlan& hp = plan.hosts()[h.plan_index];
      LaunchMsg m{h.name, cwd, options.command, h.is_local ? env.local() : env.remote(), {}};
      for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r) {
        // The user's -x wins over the rank contract (README, The rank environment).
        auto rank_env = rank_environment(plan.rank(r), net);
        apply_user_variables(rank_env, user);
        m.ranks.push_back(RankLaunch{r, std::move(rank_env)});
      }
      h.channel->send(FrameType::kControl, encode_control(m));
    }
    phase = Phase::kRunning;
    deadline.cancel();
    spdlog::info("hvrun: started {} ranks on {} hosts", plan.size(), hosts.size());
  }

  void on_start_timeout() {
    std::string missing;
    for (const Host& h : hosts)
      if (!h.hello && h.connect_error.empty()) missing += (missing.empty() ? "" : ", ") + h.name;
    fail_job("agents did not start within " + seconds_text(options.start_timeout) + " on: " + missing +
             "; raise --start-timeout or check those hosts");
  }

  // ---- events ------------------------------------------------------------------------------------

  void on_frame(std::size_t i, Frame&& f) {
    Host& h = hosts[i];
    rearm_watchdog(i);
    try {
      if (f.type == FrameType::kOutput) {
        OutputChunk c = decode_output(f.payload, h.channel->peer());
        check_rank_of(i, c.rank);
        if (t_first_output == Clock::time_point{}) t_first_output = Clock::now();
        output->write(c.rank, c.stream, c.bytes);
        h.to_ack += c.bytes.size();
        acknowledge(h);
        return;
      }
      std::visit([&](auto&& m) { handle(i, std::move(m)); }, decode_control(f.payload, h.channel->peer()));
    } catch (const ProtocolError& e) {
      h.channel->close();
      on_agent_closed(i, e.what());
    } catch (const std::exception& e) {
      // Anything else (a rank environment hvrun cannot encode, a failed system call) ends the job
      // through the orderly teardown, never past it.
      fail_job(user_message(e, "handling a message from the agent on " + h.name));
    }
  }

  // Output flow control (OutputAckMsg): acknowledge in quarter windows while hvrun's stdout keeps up;
  // while it does not, hold the acknowledgements back, so agents stop reading their ranks' pipes.
  void acknowledge(Host& h) {
    if (output->congested()) {
      if (!congestion_noticed) {
        congestion_noticed = true;
        spdlog::warn("hvrun: ranks print faster than hvrun's output is read; they now wait on their writes "
                     "(back-pressure): nothing is dropped");
      }
      return;
    }
    if (h.to_ack >= kOutputWindow / 4) send_ack(h);
  }

  void acknowledge_all() {
    for (Host& h : hosts)
      if (h.to_ack > 0) send_ack(h);
  }

  void send_ack(Host& h) {
    if (live(h)) h.channel->send(FrameType::kControl, encode_control(OutputAckMsg{static_cast<int>(h.to_ack)}));
    h.to_ack = 0;
  }

  void check_rank_of(std::size_t i, int rank) const {
    if (rank < 0 || rank >= plan.size() || ranks[rank].host != i)
      throw ProtocolError(hosts[i].channel->peer() + ": message about rank " + std::to_string(rank) +
                          ", which is not on that host");
  }

  void handle(std::size_t i, HelloMsg m) { on_hello(i, std::move(m)); }

  void handle(std::size_t i, ReadyMsg m) {
    Host& h = hosts[i];
    if (h.ready || !h.hello) throw ProtocolError(h.channel->peer() + ": ready out of turn");
    h.ready = m;
    maybe_probe();
  }
  void handle(std::size_t, HeartbeatMsg) {}

  void handle(std::size_t i, HorovodRendezvousReadyMsg m) {
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) return;  // the job failed meanwhile
    if (phase != Phase::kRendezvous || i != ranks.at(0).host)
      throw ProtocolError(hosts[i].channel->peer() + ": Horovod rendezvous ready out of turn");
    spdlog::info("hvrun: Horovod's Gloo rendezvous is at {}:{} on {}", horovod_rendezvous_addr, m.port, hosts[i].name);
    horovod_rendezvous_port = m.port;
    launch();
  }

  void handle(std::size_t i, StartedMsg m) {
    check_rank_of(i, m.rank);
    spdlog::debug("hvrun: rank {} on {} is pid {}", m.rank, hosts[i].name, m.pid);
  }

  void handle(std::size_t i, ExitedMsg m) {
    check_rank_of(i, m.rank);
    RankState& r = ranks[m.rank];
    if (r.exited) throw ProtocolError(hosts[i].channel->peer() + ": rank " + std::to_string(m.rank) + " exited twice");
    r.exited = true;
    ++exited_count;
    output->flush(m.rank);
    const bool failed = m.exit_code != 0 || m.signal != 0 || !m.error.empty();
    if (failed && phase == Phase::kRunning) report_rank_failure(i, m);
    if (exited_count == plan.size()) {
      t_ranks_done = Clock::now();
      shut_down();
    }
  }

  // An agent that reports a fatal error started none of its ranks (it refuses the launch before the
  // first spawn), so none will report an exit: count them as ended, or stopping the other hosts' ranks
  // would wait out its deadline for confirmations that never come.
  void handle(std::size_t i, FatalMsg m) {
    fail_job(hosts[i].name + ": " + m.error);
    mark_host_ranks_exited(hosts[i]);
    if (exited_count == plan.size()) shut_down();
  }

  template <typename M>
  void handle(std::size_t i, M&&) {
    throw ProtocolError(hosts[i].channel->peer() + ": unexpected control message");
  }

  void report_rank_failure(std::size_t i, const ExitedMsg& m) {
    failure_reported = true;
    exit_code = !m.error.empty() ? kExitCannotExecute : m.exit_code;
    // The rank's own output comes first; a reader that does not take it soon does not hold the report.
    output->drain(kReportDrainTimeout);
    std::string text = "hvrun: rank " + std::to_string(m.rank) + " on " + hosts[i].name + ": " + describe_exit(m);
    const auto& tail = output->last_stderr(m.rank);
    if (!tail.empty() && m.error.empty()) {
      text += "; its last stderr lines:";
      for (const auto& line : tail) text += "\n    " + line;
    }
    const int others = plan.size() - exited_count;
    if (others > 0) text += "\nhvrun: stopping the other " + std::to_string(others) + " ranks";
    spdlog::error("{}", text);
    stop_ranks(options.kill_grace);
  }

  void on_agent_closed(std::size_t i, const std::string& error) {
    Host& h = hosts[i];
    if (h.closed) return;
    h.closed = true;
    if (h.watchdog) h.watchdog->cancel();
    mark_host_ranks_exited(h);
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) {
      maybe_done();
      return;
    }
    std::string why = error.empty() ? std::string("it exited") : error;
    if (h.remote) {
      std::string tail = h.remote->stderr_tail();
      while (!tail.empty() && tail.back() == '\n') tail.pop_back();
      if (!tail.empty()) why += "; its last words: " + tail.substr(tail.rfind('\n') + 1);
    }
    fail_job("lost the agent on " + h.name + ": " + why);
    if (exited_count == plan.size()) shut_down();
  }

  // Ranks an agent never reported are gone with it: it kills them when its channel closes.
  void mark_host_ranks_exited(const Host& h) {
    const HostPlan& hp = plan.hosts()[h.plan_index];
    for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r)
      if (!ranks[r].exited) {
        ranks[r].exited = true;
        ++exited_count;
      }
  }

  void fail_job(const std::string& why) {
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) return;
    if (!failure_reported) {
      failure_reported = true;
      exit_code = kExitLaunchFailed;
      if (status) status->clear();
      spdlog::error("hvrun: {}", why);
    }
    if (before_launch()) return shut_down();
    stop_ranks(options.kill_grace);
  }

  void on_signal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (phase == Phase::kDone) {
      spdlog::warn("hvrun: received {} while rank output was still being written; the rest is dropped",
                   signal_name(sig));
      io.stop();
      return;
    }
    ++interrupts;
    if (!failure_reported) {
      failure_reported = true;
      exit_code = 128 + sig;
      if (status) status->clear();
      spdlog::error("hvrun: received {}; stopping all ranks", signal_name(sig));
    }
    if (before_launch()) {
      shut_down();
    } else if (interrupts > 1) {
      stop_ranks(milliseconds(0));  // a second Ctrl-C: no more grace
    } else {
      stop_ranks(options.kill_grace);
    }
    signals.async_wait([this](auto e, int s) { on_signal(e, s); });
  }

  // ---- teardown ----------------------------------------------------------------------------------

  void stop_ranks(milliseconds grace) {
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) return;
    phase = Phase::kStopping;
    for (Host& h : hosts)
      if (live(h))
        h.channel->send(FrameType::kControl, encode_control(TerminateMsg{static_cast<int>(grace.count())}));
    arm_deadline(grace + kAfterKillSlack, [this] {
      spdlog::warn("hvrun: some agents did not confirm that their ranks ended; closing their channels");
      shut_down();
    });
  }

  void shut_down() {
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) return;
    phase = Phase::kShuttingDown;
    for (Host& h : hosts) {
      if (live(h)) h.channel->send(FrameType::kControl, encode_control(ShutdownMsg{}));
      // A host still connecting is abandoned: its agent, if it comes, is dropped on arrival.
      if (!h.channel) h.closed = true;
    }
    arm_deadline(kShutdownTimeout, [this] { finish(); });
    maybe_done();
  }

  static bool live(const Host& h) { return h.channel && !h.closed; }
  bool before_launch() const {
    return phase == Phase::kStarting || phase == Phase::kProbing || phase == Phase::kRendezvous;
  }

  void maybe_done() {
    for (const Host& h : hosts)
      if (!h.closed) return;
    finish();
  }

  void finish() {
    phase = Phase::kDone;
    for (Host& h : hosts) {
      if (h.channel) h.channel->close();
      if (h.watchdog) h.watchdog->cancel();
    }
    heartbeat_timer.cancel();
    progress_timer.cancel();
    deadline.cancel();
    // Everything the ranks printed is written before hvrun exits, however slowly stdout is read; a
    // signal meanwhile (on_signal) gives up on it.
    output->notify_when_empty([this] { asio::post(io, [this] { io.stop(); }); });
  }

  template <typename F>
  void arm_deadline(milliseconds after, F on_expiry) {
    deadline.expires_after(after);
    deadline.async_wait([on_expiry](auto ec) {
      if (!ec) on_expiry();
    });
  }

  void log_timings() const {
    auto since = [&](Clock::time_point from, Clock::time_point to) -> std::string {
      if (from == Clock::time_point{} || to == Clock::time_point{}) return "-";
      return std::to_string(std::chrono::duration_cast<milliseconds>(to - from).count()) + " ms";
    };
    const bool any_remote = std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return !h.is_local; });
    spdlog::info("hvrun: timings: connect {}, agents up {}, probe {}, probes sent {}, launch to first output {}, "
                 "ranks ran {}, teardown {}, total {}",
                 any_remote ? since(t_start, t_connected) : std::string("local"), since(t_start, t_agents_up),
                 since(t_agents_up, t_decided), round ? round->probes_sent() : 0, since(t_decided, t_first_output), since(t_decided, t_ranks_done),
                 since(t_ranks_done, Clock::now()), since(t_start, Clock::now()));
  }
};

Job::Job(LaunchOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Job::~Job() = default;
int Job::run() { return impl_->run(); }

}  // namespace hvrun

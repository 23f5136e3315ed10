#include "launcher/job.hpp"

#include <signal.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <iostream>
#include <algorithm>
#include <optional>
#include <spdlog/spdlog.h>

#include "agent/wire/control_message.hpp"
#include "agent/wire/duration_text.hpp"
#include "agent/wire/error.hpp"
#include "agent/wire/job_secret.hpp"
#include "agent/rank_process.hpp"
#include "hvrun/version.hpp"
#include "launcher/agent_links.hpp"
#include "launcher/check_run.hpp"
#include "launcher/connect_progress.hpp"
#include "launcher/connector.hpp"
#include "launcher/dry_run.hpp"
#include "launcher/env_policy.hpp"
#include "launcher/horovod_rendezvous_plan.hpp"
#include "launcher/host_locality.hpp"
#include "launcher/job_host.hpp"
#include "launcher/launch_timings.hpp"
#include "launcher/mpirun_process.hpp"
#include "launcher/nic_filter.hpp"
#include "launcher/output_mux.hpp"
#include "launcher/probe_messages.hpp"
#include "launcher/probe_peers.hpp"
#include "launcher/probe_retry.hpp"
#include "launcher/probe_round.hpp"
#include "launcher/rank_exits.hpp"
#include "launcher/rank_launch.hpp"
#include "launcher/rank_plan.hpp"
#include "launcher/same_host.hpp"
#include "launcher/shell_quote.hpp"
#include "launcher/status_line.hpp"
#include "launcher/teardown.hpp"
#include "launcher/user_env.hpp"

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

}  // namespace

struct Job::Impl {
  using Host = JobHost;
  using Phase = Teardown::Phase;

  explicit Impl(LaunchOptions o)
      : options(std::move(o)),
        plan(options.hosts, options.np, options.no_oversubscribe),
        signals(io, SIGINT, SIGTERM),
        deadline(io),
        progress_timer(io),
        secret(JobSecret::generate()),
        teardown(options.kill_grace) {}

  LaunchOptions options;
  RankPlan plan;
  std::unique_ptr<StatusLine> status;
  asio::io_context io;
  asio::signal_set signals;
  asio::steady_timer deadline;
  asio::steady_timer progress_timer;
  JobSecret secret;
  std::vector<Host> hosts;
  RankExits exits;
  std::unique_ptr<AgentLinks> links;  // one per host, from start_agents() on
  std::unique_ptr<OutputMux> output;
  NicFilter filter;
  bool single_host = false;
  std::optional<ProbeRound> round;  // from probing on
  bool evaluation_pending = false;
  std::chrono::steady_clock::time_point probe_started;
  std::chrono::milliseconds probe_ms{0};
  using Clock = LaunchTimings::Clock;
  LaunchTimings timings;  // when each phase ended, for --verbose (log_timings)
  Teardown teardown;
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
        [this] { asio::post(io, [this] {
          if (links) links->acknowledge_all();
        }); });
    start_agents();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    arm_deadline(options.start_timeout, [this] { on_start_timeout(); });
    run_loop();
    signals.cancel();
    for (auto& h : hosts)
      if (h.local) h.local->reap(kShutdownTimeout);
    log_timings();
    if (!mpirun || teardown.exit_code() != kExitOk) return teardown.exit_code();
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
        const std::string line = user_message(e, teardown.activity());
        if (teardown.failure_reported() || teardown.tearing_down()) spdlog::error("hvrun: {}", line);
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
    std::vector<std::string> names;
    for (const auto& hp : plan.hosts()) names.push_back(hp.host);
    const auto local = find_local_hosts(names, kResolveTimeout);

    exits = RankExits(plan.size());
    for (std::size_t i = 0; i < plan.hosts().size(); ++i) {
      const HostPlan& hp = plan.hosts()[i];
      if (hp.local_size == 0) continue;
      Host h;
      h.plan_index = i;
      h.name = hp.host;
      h.is_local = local[i];
      exits.assign(hosts.size(), hp.first_rank, hp.local_size);
      hosts.push_back(std::move(h));
    }
    std::vector<std::string> job_hosts;
    for (const Host& h : hosts) job_hosts.push_back(h.name);
    links = std::make_unique<AgentLinks>(
        io, job_hosts, options.heartbeat_timeout,
        AgentLinks::Events{.on_frame = [this](std::size_t i, Frame&& f) { on_frame(i, std::move(f)); },
                           .on_closed = [this](std::size_t i, const std::string& e) { on_agent_closed(i, e); }});
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
    links->start_heartbeats();
    show_progress();
    if (status) tick_progress(kNamePendingAfter);
  }

  void on_connected(std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
    Host& h = hosts[i];
    h.connecting = false;
    if (!error.empty()) {
      h.connect_error = error;
      links->mark_closed(i);
      exits.mark_host_exited(i);
    } else {
      h.remote = std::move(agent);
      if (teardown.phase() == Phase::kStarting) attach(i, h.remote->take_channel());
    }
    show_progress();
    if (teardown.phase() != Phase::kStarting) return;
    if (std::any_of(hosts.begin(), hosts.end(), [](const Host& x) { return x.connecting; })) return;
    timings.connected = Clock::now();
    if (options.check_only) return maybe_probe();
    if (const auto failures = connect_failures(hosts)) fail_job(*failures);
  }

  void show_progress() {
    if (!status || teardown.phase() != Phase::kStarting) return;
    const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - timings.start);
    status->show(progress_text(start_progress(hosts, elapsed)));
  }

  // Redraws the status line once a second from kNamePendingAfter on, so pending hosts get named even
  // when no event comes.
  void tick_progress(milliseconds after) {
    progress_timer.expires_after(after);
    progress_timer.async_wait([this](auto ec) {
      if (ec || teardown.phase() != Phase::kStarting) return;
      show_progress();
      tick_progress(milliseconds(1000));
    });
  }

  // Starts the conversation with the agent of hosts[i] over `fd`.
  void attach(std::size_t i, UniqueFd fd) {
    std::vector<std::string> names;
    for (const Host& other : hosts) names.push_back(other.name);
    const bool serves_store = exits.size() > 0 && exits.host_of(0) == i;
    links->attach(i, std::move(fd),
                  JobMsg{secret.hex(), static_cast<int>(options.heartbeat_timeout.count()), static_cast<int>(i), names,
                         serves_store});
  }

  void on_hello(std::size_t i, HelloMsg m) {
    Host& h = hosts[i];
    if (h.hello) throw ProtocolError(links->peer(i) + ": a second hello");
    if (m.version != kVersion)
      throw ProtocolError(links->peer(i) + " is version " + m.version + ", hvrun is " + kVersion +
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
    if (teardown.phase() != Phase::kStarting) return;
    for (const auto& other : hosts)
      if (!(other.hello && other.ready) && (other.connecting || other.connect_error.empty())) return;
    if (status) status->clear();
    timings.agents_up = Clock::now();
    if (const auto twin = same_host()) {
      teardown.record_failure(kExitUsage);
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
    teardown.advance(Phase::kProbing);
    ProbeMembers members = probe_members(hosts);
    // Every host in the list is this machine (`-H localhost:2,127.0.0.1:2`): loopback is the NIC.
    single_host = std::all_of(hosts.begin(), hosts.end(), [](const Host& h) { return h.is_local; });
    const std::size_t peers = probe_peer_count(options.probe_peers, options.check_only);
    try {
      round.emplace(std::move(members.hosts), std::move(members.inventories), filter, single_host, peers,
                    !options.check_only);
    } catch (const UsageError& e) {
      teardown.record_failure(kExitUsage);
      spdlog::error("hvrun: error: {}", e.what());
      return shut_down();
    }
    probe_started = std::chrono::steady_clock::now();
    spdlog::info("hvrun: probing {} addresses of {} hosts ({})", round->planned().size(), hosts.size(),
                 probe_scope(peers, round->members().size()));
    send_probes(round->planned(), options.probe_timeout);
    if (round->planned().empty()) decide();
  }

  // Sends each prober its share of `probes`, in the order given.
  void send_probes(const std::vector<ProbeRound::Probe>& probes, milliseconds timeout) {
    const auto requests = probe_requests(*round, probes, hosts, timeout);
    for (std::size_t m = 0; m < requests.size(); ++m)
      if (!requests[m].targets.empty()) links->send(round->members()[m], requests[m]);
    // Probes end by themselves within the timeout; the slack covers agents that are slow to say so.
    arm_deadline(timeout + kProbeSlack, [this] { decide(); });
  }

  void handle(std::size_t i, ProbeResultMsg m) {
    if (teardown.phase() != Phase::kProbing) return;
    if (round->add(probe_result(*round, hosts, i, m, links->peer(i)))) return decide();
    if (!options.check_only && !evaluation_pending) {
      // Results come in bursts; judge once per burst.
      evaluation_pending = true;
      asio::post(io, [this] {
        evaluation_pending = false;
        if (teardown.phase() == Phase::kProbing && round->decision_is_final()) decide();
      });
    }
  }

  // The selection of hosts[i] (a host without an agent has none).
  std::optional<NicChoice> choice_of(std::size_t i) const { return round ? round->choice_of(i) : std::nullopt; }

  void decide() {
    if (teardown.phase() != Phase::kProbing) return;
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
    timings.decided = Clock::now();
    probe_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timings.decided - probe_started);
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (auto c = choice_of(i)) spdlog::info("hvrun: {} uses {} {} ({})", hosts[i].name, c->iface, c->address, c->why);
    if (options.check_only) return report_check();
    bool all = true;
    for (std::size_t i = 0; i < hosts.size(); ++i) all = all && choice_of(i).has_value();
    if (!all) {
      teardown.record_failure(kExitLaunchFailed);
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
    const std::size_t r0 = exits.host_of(0);
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
    teardown.advance(Phase::kRendezvous);
    links->send(r0, HorovodRendezvousMsg{p->address, p->allowed_peers});
    arm_deadline(options.start_timeout, [this, r0] {
      fail_job("the agent on " + hosts[r0].name + " did not start Horovod's rendezvous within " +
               seconds_text(options.start_timeout) + "; raise --start-timeout or check that host");
    });
  }

  // --mpi: the agents' work ends with the choice; mpirun runs once they are gone (run()).
  void prepare_mpirun() {
    const MpirunInput in = mpirun_input_for(hosts, plan, *round, options);
    try {
      mpirun = mpirun_argv(in);
      spdlog::info("hvrun: --mpi: {}", shell_line(*mpirun));
    } catch (const Error& e) {
      teardown.record_failure(kExitLaunchFailed);
      spdlog::error("hvrun: {}", e.what());
    }
    shut_down();
  }

  CheckReport report() const {
    return check_report_of(hosts, round ? &*round : nullptr, CheckInput{{}, probe_ms, filter, single_host});
  }

  void report_check() {
    teardown.set_exit_code(print_check_report(report(), options));
    teardown.mark_reported();
    shut_down();
  }

  void launch() {
    const JobServices services{exits.host_of(0), secret.store_token(), horovod_rendezvous_addr,
                               horovod_rendezvous_port};
    const JobNetwork net = job_network(hosts, plan, *round, services);
    const EnvPolicy env(launcher_environment(), options);
    for (const std::string& name : env.unset())
      spdlog::warn("hvrun: -x {}: not set in hvrun's environment, so not passed to the ranks", name);
    const std::string cwd = current_directory();
    std::vector<std::string> names;
    for (const HostInventory& inv : round->inventories()) names.push_back(inv.host);
    if (const std::string line = user_nic_contradictions(env.user(), names, round->selections()); !line.empty())
      spdlog::warn("hvrun: {}", line);
    for (std::size_t i = 0; i < hosts.size(); ++i)
      links->send(i, launch_message(hosts[i], plan, net, env, options, cwd));
    teardown.advance(Phase::kRunning);
    deadline.cancel();
    spdlog::info("hvrun: started {} ranks on {} hosts", plan.size(), hosts.size());
  }

  void on_start_timeout() {
    fail_job("agents did not start within " + seconds_text(options.start_timeout) + " on: " + agents_missing(hosts) +
             "; raise --start-timeout or check those hosts");
  }

  // ---- events ------------------------------------------------------------------------------------

  void on_frame(std::size_t i, Frame&& f) {
    try {
      if (f.type == FrameType::kOutput) {
        OutputChunk c = decode_output(f.payload, links->peer(i));
        check_rank_of(i, c.rank);
        if (timings.first_output == Clock::time_point{}) timings.first_output = Clock::now();
        output->write(c.rank, c.stream, c.bytes);
        links->took_output(i, c.bytes.size(), output->congested());
        return;
      }
      std::visit([&](auto&& m) { handle(i, std::move(m)); }, decode_control(f.payload, links->peer(i)));
    } catch (const ProtocolError& e) {
      links->close_channel(i);
      on_agent_closed(i, e.what());
    } catch (const std::exception& e) {
      // Anything else (a rank environment hvrun cannot encode, a failed system call) ends the job
      // through the orderly teardown, never past it.
      fail_job(user_message(e, "handling a message from the agent on " + hosts[i].name));
    }
  }

  void check_rank_of(std::size_t i, int rank) const {
    if (!exits.runs_on(rank, i))
      throw ProtocolError(links->peer(i) + ": message about rank " + std::to_string(rank) +
                          ", which is not on that host");
  }

  void handle(std::size_t i, HelloMsg m) { on_hello(i, std::move(m)); }

  void handle(std::size_t i, ReadyMsg m) {
    Host& h = hosts[i];
    if (h.ready || !h.hello) throw ProtocolError(links->peer(i) + ": ready out of turn");
    h.ready = m;
    maybe_probe();
  }
  void handle(std::size_t, HeartbeatMsg) {}

  void handle(std::size_t i, HorovodRendezvousReadyMsg m) {
    if (teardown.tearing_down()) return;  // the job failed meanwhile
    if (teardown.phase() != Phase::kRendezvous || i != exits.host_of(0))
      throw ProtocolError(links->peer(i) + ": Horovod rendezvous ready out of turn");
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
    if (!exits.record(m.rank))
      throw ProtocolError(links->peer(i) + ": rank " + std::to_string(m.rank) + " exited twice");
    output->flush(m.rank);
    if (exit_failed(m) && teardown.phase() == Phase::kRunning) report_rank_failure(i, m);
    if (exits.all_exited()) {
      timings.ranks_done = Clock::now();
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
    spdlog::error("{}", rank_failure_report(m, hosts[i].name, output->last_stderr(m.rank), exits.running()));
    stop_ranks(options.kill_grace);
  }

  void on_agent_closed(std::size_t i, const std::string& error) {
    Host& h = hosts[i];
    if (links->closed(i)) return;
    links->mark_closed(i);
    exits.mark_host_exited(i);
    if (teardown.tearing_down()) {
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
    if (exits.all_exited()) shut_down();
  }

  // ---- teardown (the decisions: teardown.hpp) ------------------------------------------------------

  void fail_job(const std::string& why) { carry_out(teardown.fail(), "hvrun: " + why); }

  void on_signal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    const Teardown::Decision d = teardown.on_signal(sig);
    if (d.action == Teardown::Action::kDropOutput) {
      spdlog::warn("hvrun: received {} while rank output was still being written; the rest is dropped",
                   signal_name(sig));
      io.stop();
      return;
    }
    carry_out(d, "hvrun: received " + signal_name(sig) + "; stopping all ranks");
    signals.async_wait([this](auto e, int s) { on_signal(e, s); });
  }

  // `line`: the failure's report, printed when it is the first.
  void carry_out(const Teardown::Decision& d, const std::string& line) {
    if (d.report) {
      if (status) status->clear();
      spdlog::error("{}", line);
    }
    if (d.action == Teardown::Action::kShutDown) shut_down();
    if (d.action == Teardown::Action::kStopRanks) stop_ranks(d.grace);
  }

  void stop_ranks(milliseconds grace) {
    if (!teardown.stop_ranks()) return;
    links->send_all(TerminateMsg{static_cast<int>(grace.count())});
    arm_deadline(grace + kAfterKillSlack, [this] {
      spdlog::warn("hvrun: some agents did not confirm that their ranks ended; closing their channels");
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
    links->close_all();
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
    const bool any_remote = std::any_of(hosts.begin(), hosts.end(), [](const Host& h) { return !h.is_local; });
    spdlog::info("{}", timings_text(timings, any_remote, round ? round->probes_sent() : 0, Clock::now()));
  }
};

Job::Job(LaunchOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Job::~Job() = default;
int Job::run() { return impl_->run(); }

}  // namespace hvrun

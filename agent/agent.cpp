#include "agent/agent.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <optional>
#include <set>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <vector>

#include "agent/agent_state.hpp"
#include "agent/fingerprint_taker.hpp"
#include "agent/free_port.hpp"
#include "agent/kernel_log.hpp"
#include "agent/mpi_rank_finder.hpp"
#include "agent/group_cpu.hpp"
#include "agent/proc_scan.hpp"
#include "agent/rank_observer.hpp"
#include "agent/rank_pipes.hpp"
#include "agent/rank_tools.hpp"
#include "agent/stack_collector.hpp"
#include "agent/sync_check.hpp"
#include "agent/output_flow.hpp"
#include "agent/rank_table.hpp"
#include "common/control_message.hpp"
#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/user_message.hpp"
#include "agent/network_stack.hpp"
#include "common/frame_channel.hpp"
#include "common/heartbeat.hpp"
#include "common/io_sizes.hpp"
#include "common/local_hostname.hpp"
#include "common/log.hpp"
#include "common/probe_message.hpp"
#include "common/job_secret.hpp"
#include "agent/probe_listener.hpp"
#include "agent/link_tester.hpp"
#include "agent/prober.hpp"
#include "agent/rendezvous_knock.hpp"
#include "common/horovod_rendezvous.hpp"
#include "common/throttled_log.hpp"
#include "agent/store_server.hpp"
#include "agent/rank_process.hpp"
#include "hvrun/version.hpp"

namespace hvrun {

namespace asio = boost::asio;
using Descriptor = asio::posix::stream_descriptor;

// The driver: it does the I/O and carries out what the pure cores decide: AgentState (what each
// message does in each phase), OutputFlow (when the ranks' pipes are read) and RankTable (which pid
// is which rank, and its exit report).
struct Agent::Impl {
  Impl(UniqueFd in, UniqueFd out)
      : channel(io, std::move(in), std::move(out), "launcher"),
        child_signals(io, SIGCHLD),
        stop_signals(io, SIGTERM, SIGINT, SIGHUP),
        kill_timer(io),
        heartbeats(io, [this] { send(HeartbeatMsg{report_cpu ? ranks_cpu.since_last(rank_groups()) : 0}); }),
        // Nothing from the launcher for a whole heartbeat period: it is dead or cut off (a pulled
        // cable leaves the SSH connection open but silent), and its ranks must not outlive it.
        watchdog(io, [this] {
          on_launcher_gone("no message from the launcher for " + seconds_text(watchdog.period()));
        }),
        probe_listener(io) {}

  asio::io_context io;
  FrameChannel channel;
  asio::signal_set child_signals;
  asio::signal_set stop_signals;
  asio::steady_timer kill_timer;
  HeartbeatSender heartbeats;
  RankObserver observer{io, [this](ObservationMsg m) { send(std::move(m)); }};  // issue 40
  Watchdog watchdog;  // disarmed until the JobMsg gives the period
  AgentState state;
  std::optional<JobSecret> secret;
  int host_index = -1;
  ProbeListener probe_listener;
  std::unique_ptr<Prober> prober;
  std::unique_ptr<LinkTester> link_tester;
  std::unique_ptr<RendezvousKnock> knock;  // the latest KnockMsg's
  std::unique_ptr<StoreServer> store;  // lives as long as the job: the agent exits with it
  std::unique_ptr<HorovodRendezvous> horovod_rendezvous;  // likewise, on rank 0's host
  RankTable ranks;
  std::vector<RankPipes> pipes;  // parallel to ranks: a rank's slot indexes both
  std::vector<Child> processes;  // likewise: each rank's handle, which reaps it
  OutputFlow flow;
  // The crash handler and stack folder given to ranks; null when it could not be made (the ranks run
  // without, and hvrun says so once).
  std::unique_ptr<RankTools> tools;
  std::unique_ptr<MpiRankFinder> mpi_ranks;  // --mpi: the ranks mpirun started here
  std::unique_ptr<StackCollector> stacks;
  KernelLog kernel_log;           // opened now: OOM kills from the start on
  std::optional<CgroupOomCount> cgroup_ooms = own_cgroup_oom_kills();  // the count at the previous look
  bool sent_sigkill = false;      // hvrun's own SIGKILL went to the groups
  bool report_cpu = false;              // JobMsg::report_cpu
  bool elastic = false;                 // JobMsg::elastic: later launches add ranks
  GroupCpu ranks_cpu;  // what the ranks' groups used between heartbeats
  SyncChecker sync_checker;  // after io: its thread is joined before io goes
  FingerprintTaker fingerprints{io};  // likewise its worker

  // Every rank has had SIGKILL when the loop ends (a shutdown, the launcher gone); one not dead yet (in
  // uninterruptible sleep) is not waited for: init reaps it once the agent has exited.
  ~Impl() {
    set_throttled_log_sink({});  // the listeners' last counts, said as they go, to the agent's stderr
    for (Child& p : processes) p.kill_without_waiting();
  }

  void send(const ControlMessage& msg) { channel.send(FrameType::kControl, encode_control(msg)); }

  int run() {
    // A launcher that dies leaves us writing to a closed pipe: that must be an error, not a signal.
    ::signal(SIGPIPE, SIG_IGN);
    // What a rank starts and leaves behind (a setsid'd or double-forked helper) becomes our child
    // when its parent dies, not init's: signal_all finds it, however the job ends.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
      spdlog::warn("on {}: prctl(PR_SET_CHILD_SUBREAPER): {}; what a rank detaches from its session may outlive "
                   "the job there",
                   local_hostname(), std::strerror(errno));
    channel.start({
        .on_frame = [this](Frame&& f) { on_frame(std::move(f)); },
        .on_closed = [this](const std::string& error) { on_launcher_gone(error); },
        .on_drained = [this] { resume_readers(); },
    });
    wait_children();
    stop_signals.async_wait([this](auto ec, int sig) {
      if (!ec) on_launcher_gone("agent received " + signal_name(sig));
    });
    HelloMsg hello{kVersion,          local_hostname(), static_cast<int>(::getpid()), pick_free_port(),
                   probe_listener.port(), list_interfaces(), {},  {}, network_stack_identity()};
    read_ssh_connection(hello.ssh_client_address, hello.ssh_server_address);
    send(hello);
    // From now on (hello comes first) the listeners' warnings about strangers go to hvrun, which prints
    // them: this agent's stderr reaches nobody when it came over SSH.
    set_throttled_log_sink([this](const std::string& line) { send(NoticeMsg{line}); });
    io.run();
    return state.exit_code();
  }

  void on_frame(Frame&& frame) {
    watchdog.rearm();
    try {
      if (frame.type != FrameType::kControl) throw ProtocolError("launcher: unexpected output frame");
      const ControlMessage msg = decode_control(frame.payload, "launcher");
      const AgentState::Decision decision = state.on_message(msg);  // throws for what the phase refuses
      std::visit([this](const auto& m) { handle(m); }, msg);
      carry_out(decision);
    } catch (const std::exception& e) {
      on_launcher_gone(user_message(e, "handling a message from hvrun"));
    }
  }

  void handle(const JobMsg& m) {
    secret = JobSecret::from_hex(m.secret);
    watchdog.set_period(std::chrono::milliseconds(m.heartbeat_ms));
    host_index = m.host_index;
    report_cpu = m.report_cpu;
    elastic = m.elastic;
    if (!m.observe) observer.stop();
    probe_listener.identify(*secret, m.host_index, local_hostname());
    watchdog.rearm();
    heartbeats.start(std::chrono::milliseconds(m.heartbeat_ms));
    // The store binds every address: the NIC is chosen later, and the token guards it meanwhile.
    if (m.serve_store) store = std::make_unique<StoreServer>(io, secret->store_token(), "", 0);
    ReadyMsg ready{store ? store->port() : 0, "", ""};
    if (!m.mpi_marker.empty() && m.observe) watch_mpi_ranks(m.mpi_marker, ready);
    send(ready);
  }

  // --mpi: mpirun's daemons start this host's ranks; they are found by their marker and observed, their
  // where asks answered by the library mpirun preloads from `ready`'s paths.
  void watch_mpi_ranks(const std::string& marker, ReadyMsg& ready) {
    tools = RankTools::create_or_warn();
    const std::string stack_dir = tools ? tools->stack_dir() : std::string();
    if (tools) ready = ReadyMsg{ready.store_port, tools->library(), stack_dir};
    mpi_ranks = std::make_unique<MpiRankFinder>(
        io, marker, [this, stack_dir](int rank, pid_t pid) { observer.add(rank, pid, stack_dir); });
    mpi_ranks->start();
  }

  void handle(const HorovodRendezvousMsg& m) {
    try {
      horovod_rendezvous = std::make_unique<HorovodRendezvous>(
          io, HorovodRendezvousOptions{m.address, 0, {m.allowed_peers.begin(), m.allowed_peers.end()}, {}, std::nullopt});
    } catch (const Error& e) {
      return send(FatalMsg{std::string(e.what()) + " on " + local_hostname()});
    }
    state.serving_horovod_rendezvous();
    log_of(LogSubsys::kRendezvous).debug("Horovod rendezvous on {}:{}", m.address, horovod_rendezvous->port());
    send(HorovodRendezvousReadyMsg{horovod_rendezvous->port()});
  }

  void handle(const OutputAckMsg& m) {
    flow.acknowledge(m.bytes);
    resume_readers();
  }

  void handle(const KnockMsg& m) {
    knock = std::make_unique<RendezvousKnock>(io, m, [this](KnockResultMsg r) { send(r); });
  }

  void handle(const ProbeRequestMsg& m) {
    if (!prober) prober = std::make_unique<Prober>(io, *secret);
    // An address this host holds itself (docker0's 172.17.0.1 is on every host) never reaches the
    // peer: the kernel delivers it here. Answer for it at once, as this host.
    const std::vector<std::string> own = own_addresses();
    std::vector<ProbeAddress> remote;
    for (const auto& t : m.targets) {
      if (std::find(own.begin(), own.end(), t.address) != own.end())
        send(ProbeResultMsg{t.host, t.iface, t.address, ProbeOutcome::kWrongHost, host_index, 0,
                            "the address is also one of the probing host's own"});
      else
        remote.push_back(t);
    }
    prober->probe(remote, std::chrono::milliseconds(m.timeout_ms), [this](ProbeResultMsg r) {
      if (!state.finished()) send(r);
    });
  }

  void handle(const LinkTestRequestMsg& m) {
    if (!link_tester) link_tester = std::make_unique<LinkTester>(io, *secret);
    link_tester->test(m, [this](LinkTestResultMsg r) { if (!state.finished()) send(r); });
  }

  void handle(const LaunchMsg& m) {
    struct stat st{};
    if (!m.cwd.empty() && (::stat(m.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
      send(FatalMsg{"working directory '" + m.cwd + "' does not exist on " + local_hostname() +
                    "; create it there or start hvrun from a directory every host has"});
      return;
    }
    // A Horovod elastic job's later launches add ranks beside those running: their tools stay.
    if (!stacks || !elastic) {
      tools = RankTools::create_or_warn();
      stacks = std::make_unique<StackCollector>(io, tools ? tools->stack_dir() : std::string());
    }
    for (const auto& r : m.ranks) {
      try {
        auto env = rank_environment(m, r);
        if (tools) env = tools->equip(std::move(env));
        RankProcess p = spawn_rank(RankSpawnSpec{m.argv, std::move(env), m.cwd});
        set_nonblocking(p.out.get(), "rank stdout");
        set_nonblocking(p.err.get(), "rank stderr");
        const std::size_t slot = ranks.add(r.rank, p.process.pid());
        pipes.emplace_back(io, p.out.release(), p.err.release());
        send(StartedMsg{r.rank, p.process.pid()});
        observer.add(r.rank, p.process.pid(), tools ? tools->stack_dir() : std::string());
        processes.push_back(std::move(p.process));
        arm({slot, OutputStream::kStdout});
        arm({slot, OutputStream::kStderr});
      } catch (const SpawnError& e) {
        send(spawn_failure_report(r.rank, e.what()));
      }
    }
  }

  // --max-restarts: every rank has exited and reported; the next attempt starts clean. What the last
  // one left behind (a helper that ignored SIGTERM) goes now, the SIGKILL still pending from its
  // terminate must not reach the new ranks, and the store and Horovod's rendezvous start empty.
  void handle(const RestartMsg& m) {
    signal_all(SIGKILL);
    if (!ranks.retire_all())
      throw ProtocolError("launcher: restart while a rank on " + local_hostname() + " still runs");
    // What is left in the old ranks' pipes goes now, before the answer: after it, the launcher may have
    // placed those ranks on other hosts.
    for (std::size_t slot = 0; slot < pipes.size(); ++slot)
      for (const OutputStream st : {OutputStream::kStdout, OutputStream::kStderr}) {
        for (int i = 0; i < kDrainChunks && read_once({slot, st}, false); ++i) {
        }
        send_output({slot, st}, pipes[slot].close(st));
      }
    kill_timer.cancel();
    sent_sigkill = false;
    ranks_cpu.reset();
    horovod_rendezvous.reset();
    store.reset();
    if (m.serve_store) store = std::make_unique<StoreServer>(io, secret->store_token(), "", 0);
    log_of(LogSubsys::kRank).debug("restart {} on {}", m.attempt, local_hostname());
    send(RestartReadyMsg{pick_free_port(), store ? store->port() : 0});
  }

  // The hashing and the interpreter's run go on beside the loop that answers probes and heartbeats.
  void handle(const FingerprintRequestMsg& m) {
    fingerprints.take(
        m, [this](FingerprintMsg f) { if (!state.finished()) send(f); },
        [this](const std::string& e) {
          if (!state.finished()) send(FatalMsg{"taking the fingerprint on " + local_hostname() + ": " + e});
        });
  }

  // --sync: hashing may take seconds, so it runs beside the loop that answers probes and heartbeats.
  void handle(const SyncCheckMsg& m) {
    sync_checker.start(m.files, [this](std::vector<int> need) {
      asio::post(io, [this, need = std::move(need)] {
        if (!state.finished()) send(SyncNeedMsg{need});
      });
    });
  }

  std::vector<pid_t> rank_groups() const {
    std::vector<pid_t> groups;
    for (const auto& e : ranks.entries()) groups.push_back(e.pid);
    return groups;
  }

  // Every rank still running (no answer at all before the launch: nothing runs).
  void handle(const StacksRequestMsg& m) {
    std::vector<StackCollector::Rank> running;
    for (const auto& e : ranks.entries())
      if (!e.reaped) running.push_back({e.rank, e.pid});
    if (!stacks || running.empty()) return send(StacksMsg{});
    observer.hold_asks(std::chrono::milliseconds(m.timeout_ms) + RankObserver::kWindow);
    stacks->collect(running, std::chrono::milliseconds(m.timeout_ms), [this](StacksMsg msg) {
      if (!state.finished()) send(msg);
    });
  }

  // Heartbeats, terminate and shutdown: the decision is all there is to do.
  template <typename M>
  void handle(const M&) {}

  // A terminate for some ranks only (an elastic worker replaced): SIGKILL to each one's group. What one
  // of them moved out of its group is left to the job's end (signal_all's sweep at the shutdown).
  void handle(const TerminateMsg& m) {
    for (const auto& r : ranks.entries()) {
      if (r.reaped || std::find(m.ranks.begin(), m.ranks.end(), r.rank) == m.ranks.end()) continue;
      try {
        signal_group(r.pid, SIGKILL);
      } catch (const Error& e) {
        spdlog::warn("rank {}: {}", r.rank, e.what());
      }
    }
  }

  void carry_out(const AgentState::Decision& d) {
    if (d.signal != 0) signal_all(d.signal);
    if (d.kill_after) {
      kill_timer.expires_after(*d.kill_after);
      kill_timer.async_wait([this](auto ec) {
        if (!ec) signal_all(SIGKILL);
      });
    }
    switch (d.end) {
      case AgentState::End::kNone: break;
      case AgentState::End::kAfterFlush: channel.flush([this] { finish(); }); break;
      case AgentState::End::kNow: finish(); break;
    }
  }

  void on_launcher_gone(const std::string& error) {
    const AgentState::Gone gone = state.on_launcher_gone();
    if (gone.report && !error.empty()) spdlog::error("{}; killing all ranks", error);
    carry_out(gone.decision);
  }

  void finish() {
    state.finish();
    heartbeats.stop();
    if (mpi_ranks) mpi_ranks->stop();
    observer.stop();
    watchdog.cancel();
    channel.close();
    io.stop();
  }

  // Every rank's process group, then every other process the ranks started: one that left its group
  // (setsid, a double fork) is still our descendant, since we are its subreaper. With SIGKILL, passes
  // go on while they find a process not signalled yet (one forked while the previous pass ran); a
  // killed process forks no more, so this ends.
  void signal_all(int sig) {
    if (sig == SIGKILL) sent_sigkill = true;
    for (const auto& r : ranks.entries()) {
      try {
        signal_group(r.pid, sig);
      } catch (const Error& e) {
        spdlog::warn("rank {}: {}", r.rank, e.what());
      }
    }
    if (ranks.entries().empty()) return;
    std::set<pid_t> signalled;
    for (bool found = true; found;) {
      found = false;
      for (const pid_t pid : living_descendants_of(::getpid())) {
        if (!signalled.insert(pid).second) continue;
        found = sig == SIGKILL;
        if (::kill(pid, sig) != 0 && errno != ESRCH)
          spdlog::warn("kill({}, {}) on {}: {}", pid, signal_name(sig), local_hostname(), std::strerror(errno));
      }
    }
  }

  Descriptor* descriptor(OutputFlow::Reader reader) { return pipes.at(reader.slot).open(reader.stream); }

  void arm(OutputFlow::Reader reader) {
    Descriptor* d = descriptor(reader);
    if (d == nullptr) return;
    d->async_wait(Descriptor::wait_read, [this, reader](auto ec) {
      if (ec) return;
      // Back-pressure: a paused reader's rank blocks on its full pipe until the launcher has taken
      // our backlog.
      if (flow.admit(reader, channel.congested())) read_once(reader, true);
    });
  }

  void resume_readers() {
    for (const auto& reader : flow.resume(channel.congested())) read_once(reader, true);
  }

  // Reads what is available; returns false at end of stream or when nothing was there.
  bool read_once(OutputFlow::Reader reader, bool rearm) {
    Descriptor* d = descriptor(reader);
    if (d == nullptr) return false;
    char buf[kIoChunk];
    const ssize_t n = retry_eintr([&] { return ::read(d->native_handle(), buf, sizeof buf); });
    if (n > 0) {
      send_output(reader, pipes[reader.slot].pass(reader.stream, std::string_view(buf, static_cast<size_t>(n))));
      if (rearm) arm(reader);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (rearm) arm(reader);
      return false;
    }
    send_output(reader, pipes[reader.slot].close(reader.stream));  // end of stream, or an error no retry mends
    return false;
  }

  void send_output(OutputFlow::Reader reader, std::string_view bytes) {
    if (bytes.empty()) return;
    channel.send(FrameType::kOutput, encode_output(ranks.at(reader.slot).rank, reader.stream, bytes));
    flow.sent(bytes.size());
  }

  void wait_children() {
    child_signals.async_wait([this](auto ec, int) {
      if (ec) return;
      reap();
      wait_children();
    });
  }

  // Each rank through its own handle (wait4 of its pid: its peak RSS), then what the agent adopted as a
  // subreaper and no handle owns; a child of another owner (the fingerprint's interpreter) keeps its status.
  void reap() {
    for (std::size_t slot = 0; slot < processes.size(); ++slot) {
      if (ranks.at(slot).reaped) continue;
      const auto status = processes[slot].try_wait();
      if (!status) continue;
      auto reaped = ranks.reap(ranks.at(slot).pid, *status);
      if (!reaped) continue;
      observer.remove(ranks.at(slot).pid);
      add_usage(reaped->exit, processes[slot].usage());
      if (reaped->exit.signal == SIGKILL) {
        std::optional<bool> grew;
        const auto now = own_cgroup_oom_kills();
        if (cgroup_ooms && now) grew = now->kills > cgroup_ooms->kills;
        cgroup_ooms = now;
        reaped->exit.cause = sigkill_cause(sent_sigkill, kernel_log.oom_kill_of(ranks.at(slot).pid),
                                           kernel_log.readable(), grew, now ? now->cgroup : std::string());
      }
      // What the rank wrote before it died sits in the pipes: send it before the exit, so the
      // launcher shows a failing rank's last lines. A pending wait then finds nothing and re-arms.
      for (const OutputStream s : {OutputStream::kStdout, OutputStream::kStderr})
        for (int i = 0; i < kDrainChunks && read_once({reaped->slot, s}, false); ++i) {
        }
      send(reaped->exit);
    }
    reap_unowned_children(children_of(::getpid()));
  }
};

Agent::Agent(UniqueFd control_in, UniqueFd control_out)
    : impl_(std::make_unique<Impl>(std::move(control_in), std::move(control_out))) {}

Agent::~Agent() = default;

int Agent::run() { return impl_->run(); }

}  // namespace hvrun

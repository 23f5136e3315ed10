#include "agent/agent.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <optional>
#include <spdlog/spdlog.h>
#include <vector>

#include "agent/wire/control_message.hpp"
#include "agent/wire/duration_text.hpp"
#include "agent/wire/error.hpp"
#include "agent/wire/user_message.hpp"
#include "agent/network_stack.hpp"
#include "agent/wire/frame_channel.hpp"
#include "agent/wire/heartbeat.hpp"
#include "agent/wire/io_sizes.hpp"
#include "agent/wire/local_hostname.hpp"
#include "agent/wire/log.hpp"
#include "agent/wire/probe_message.hpp"
#include "agent/wire/job_secret.hpp"
#include "agent/probe_listener.hpp"
#include "agent/prober.hpp"
#include "agent/horovod_rendezvous.hpp"
#include "agent/store_server.hpp"
#include "agent/rank_process.hpp"
#include "hvrun/version.hpp"

namespace hvrun {

namespace asio = boost::asio;
using Descriptor = asio::posix::stream_descriptor;

namespace {

// A port that is free right now on every address of this host; the rank that binds it later races
// with other programs exactly as torchrun's choice does.
int pick_free_port() {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock) throw_errno("socket", "choosing MASTER_PORT");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw_errno("bind", "choosing MASTER_PORT");
  socklen_t len = sizeof addr;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno("getsockname", "choosing MASTER_PORT");
  return ntohs(addr.sin_port);
}

constexpr int kDrainChunks = 16;  // what a dead rank's pipe may still hold, read before its exit is sent

}  // namespace

struct Agent::Impl {
  struct Rank {
    int rank = 0;
    pid_t pid = -1;
    bool reaped = false;
    std::unique_ptr<Descriptor> out, err;
  };

  Impl(UniqueFd in, UniqueFd out)
      : channel(io, std::move(in), std::move(out), "launcher"),
        child_signals(io, SIGCHLD),
        stop_signals(io, SIGTERM, SIGINT, SIGHUP),
        kill_timer(io),
        heartbeats(io, [this] { send(HeartbeatMsg{}); }),
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
  Watchdog watchdog;  // disarmed until the JobMsg gives the period
  std::optional<JobSecret> secret;
  int host_index = -1;
  ProbeListener probe_listener;
  std::unique_ptr<Prober> prober;
  std::unique_ptr<StoreServer> store;  // lives as long as the job: the agent exits with it
  std::unique_ptr<HorovodRendezvous> horovod_rendezvous;  // likewise, on rank 0's host
  std::vector<std::unique_ptr<Rank>> ranks;
  std::map<pid_t, Rank*> by_pid;
  std::vector<std::function<void()>> paused;  // readers waiting for the channel to drain or for acks
  std::size_t unacked = 0;  // output payload sent and not yet acknowledged (OutputAckMsg)
  bool launched = false;
  bool finished = false;
  int exit_code = 1;

  void send(const ControlMessage& msg) { channel.send(FrameType::kControl, encode_control(msg)); }

  int run() {
    // A launcher that dies leaves us writing to a closed pipe: that must be an error, not a signal.
    ::signal(SIGPIPE, SIG_IGN);
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
    // sshd sets SSH_CONNECTION="client_ip client_port server_ip server_port" for the agent's session.
    if (const char* c = std::getenv("SSH_CONNECTION")) {
      std::istringstream words(c);
      std::string client_port, server_port;
      words >> hello.ssh_client_address >> client_port >> hello.ssh_server_address >> server_port;
    }
    send(hello);
    io.run();
    return exit_code;
  }

  void on_frame(Frame&& frame) {
    watchdog.rearm();
    try {
      if (frame.type != FrameType::kControl) throw ProtocolError("launcher: unexpected output frame");
      std::visit([this](auto&& m) { handle(m); }, decode_control(frame.payload, "launcher"));
    } catch (const std::exception& e) {
      on_launcher_gone(user_message(e, "handling a message from hvrun"));
    }
  }

  void handle(const JobMsg& m) {
    if (secret) throw ProtocolError("launcher: a second job message");
    secret = JobSecret::from_hex(m.secret);
    watchdog.set_period(std::chrono::milliseconds(m.heartbeat_ms));
    host_index = m.host_index;
    probe_listener.identify(*secret, m.host_index, local_hostname());
    watchdog.rearm();
    heartbeats.start(std::chrono::milliseconds(m.heartbeat_ms));
    // The store binds every address: the NIC is chosen later, and the token guards it meanwhile.
    if (m.serve_store) store = std::make_unique<StoreServer>(io, secret->store_token(), "", 0);
    send(ReadyMsg{store ? store->port() : 0});
  }

  void handle(const HeartbeatMsg&) {}

  void handle(const HorovodRendezvousMsg& m) {
    if (!secret) throw ProtocolError("launcher: Horovod rendezvous request before the job message");
    if (horovod_rendezvous) throw ProtocolError("launcher: a second Horovod rendezvous request");
    try {
      horovod_rendezvous = std::make_unique<HorovodRendezvous>(
          io, HorovodRendezvousOptions{m.address, 0, {m.allowed_peers.begin(), m.allowed_peers.end()}, {}});
    } catch (const Error& e) {
      return send(FatalMsg{std::string(e.what()) + " on " + local_hostname()});
    }
    log_of(LogSubsys::kRendezvous).debug("Horovod rendezvous on {}:{}", m.address, horovod_rendezvous->port());
    send(HorovodRendezvousReadyMsg{horovod_rendezvous->port()});
  }

  void handle(const OutputAckMsg& m) {
    if (m.bytes <= 0 || static_cast<std::size_t>(m.bytes) > unacked)
      throw ProtocolError("launcher: acknowledged " + std::to_string(m.bytes) + " bytes of output, " +
                          std::to_string(unacked) + " were outstanding");
    unacked -= static_cast<std::size_t>(m.bytes);
    resume_readers();
  }

  // The launcher has not yet taken a window of our output, or the channel to it is full: the ranks
  // wait on their pipes rather than our memory growing.
  bool output_blocked() const { return channel.congested() || unacked >= kOutputWindow; }

  void handle(const ProbeRequestMsg& m) {
    if (!secret) throw ProtocolError("launcher: probe request before the job message");
    if (!prober) prober = std::make_unique<Prober>(io, *secret);
    // An address this host holds itself (docker0's 172.17.0.1 is on every host) never reaches the
    // peer: the kernel delivers it here. Answer for it at once, as this host.
    const auto own = list_interfaces();
    std::vector<ProbeAddress> remote;
    for (const auto& t : m.targets) {
      if (!interface_of(own, t.address).empty())
        send(ProbeResultMsg{t.host, t.iface, t.address, to_string(ProbeOutcome::kWrongHost), host_index, 0,
                            "the address is also one of the probing host's own"});
      else
        remote.push_back(t);
    }
    prober->probe(remote, std::chrono::milliseconds(m.timeout_ms), [this](ProbeResultMsg r) {
      if (!finished) send(r);
    });
  }

  void handle(const LaunchMsg& m) {
    if (!secret) throw ProtocolError("launcher: launch before the job message");
    if (launched) throw ProtocolError("launcher: a second launch request");
    launched = true;
    struct stat st{};
    if (!m.cwd.empty() && (::stat(m.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
      send(FatalMsg{"working directory '" + m.cwd + "' does not exist on " + local_hostname() +
                    "; create it there or start hvrun from a directory every host has"});
      return;
    }
    for (const auto& r : m.ranks) {
      auto env = m.env;
      for (const auto& [k, v] : r.env) env[k] = v;
      RankSpawnSpec spec{m.argv, {}, m.cwd};
      spec.env.reserve(env.size());
      for (const auto& [k, v] : env) spec.env.push_back(k + "=" + v);
      try {
        RankProcess p = spawn_rank(spec);
        auto state = std::make_unique<Rank>();
        state->rank = r.rank;
        state->pid = p.pid;
        set_nonblocking(p.out.get(), "rank stdout");
        set_nonblocking(p.err.get(), "rank stderr");
        state->out = std::make_unique<Descriptor>(io, p.out.release());
        state->err = std::make_unique<Descriptor>(io, p.err.release());
        by_pid[p.pid] = state.get();
        ranks.push_back(std::move(state));
        send(StartedMsg{r.rank, p.pid});
        arm(*ranks.back(), OutputStream::kStdout);
        arm(*ranks.back(), OutputStream::kStderr);
      } catch (const SpawnError& e) {
        send(ExitedMsg{r.rank, 127, 0, e.what()});
      }
    }
  }

  void handle(const TerminateMsg& m) {
    signal_all(SIGTERM);
    kill_timer.expires_after(std::chrono::milliseconds(m.grace_ms));
    kill_timer.async_wait([this](auto ec) {
      if (!ec) signal_all(SIGKILL);
    });
  }

  void handle(const ShutdownMsg&) {
    // The launcher has every exit it needs; whatever the ranks left behind in their groups goes now.
    signal_all(SIGKILL);
    exit_code = 0;
    channel.flush([this] { finish(); });
  }

  template <typename M>
  void handle(const M&) {
    throw ProtocolError("launcher: unexpected control message");
  }

  void on_launcher_gone(const std::string& error) {
    if (finished) return;
    if (!error.empty()) spdlog::error("{}; killing all ranks", error);
    signal_all(SIGKILL);
    exit_code = 1;
    finish();
  }

  void finish() {
    finished = true;
    heartbeats.stop();
    watchdog.cancel();
    channel.close();
    io.stop();
  }

  void signal_all(int sig) {
    for (const auto& r : ranks) {
      try {
        signal_group(r->pid, sig);
      } catch (const Error& e) {
        spdlog::warn("rank {}: {}", r->rank, e.what());
      }
    }
  }

  Descriptor* descriptor(Rank& r, OutputStream s) {
    auto& d = s == OutputStream::kStdout ? r.out : r.err;
    return d && d->is_open() ? d.get() : nullptr;
  }

  void arm(Rank& r, OutputStream s) {
    Descriptor* d = descriptor(r, s);
    if (d == nullptr) return;
    d->async_wait(Descriptor::wait_read, [this, &r, s](auto ec) {
      if (ec) return;
      if (output_blocked()) {
        // Back-pressure: the rank blocks on its full pipe until the launcher has taken our backlog.
        paused.push_back([this, &r, s] { read_once(r, s, true); });
        return;
      }
      read_once(r, s, true);
    });
  }

  void resume_readers() {
    if (output_blocked()) return;
    auto waiting = std::exchange(paused, {});
    for (auto& resume : waiting) resume();
  }

  // Reads what is available; returns false at end of stream or when nothing was there.
  bool read_once(Rank& r, OutputStream s, bool rearm) {
    Descriptor* d = descriptor(r, s);
    if (d == nullptr) return false;
    char buf[kIoChunk];
    const ssize_t n = retry_eintr([&] { return ::read(d->native_handle(), buf, sizeof buf); });
    if (n > 0) {
      channel.send(FrameType::kOutput, encode_output(r.rank, s, std::string_view(buf, static_cast<size_t>(n))));
      unacked += static_cast<std::size_t>(n);
      if (rearm) arm(r, s);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (rearm) arm(r, s);
      return false;
    }
    boost::system::error_code ignored;
    d->close(ignored);  // end of stream, or an error that no retry will mend
    return false;
  }

  void wait_children() {
    child_signals.async_wait([this](auto ec, int) {
      if (ec) return;
      reap();
      wait_children();
    });
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = by_pid.find(pid);
      if (it == by_pid.end()) continue;
      Rank& r = *it->second;
      r.reaped = true;
      // What the rank wrote before it died sits in the pipes: send it before the exit, so the
      // launcher shows a failing rank's last lines. A pending wait then finds nothing and re-arms.
      // At most a few pipefuls, past the window: a child that outlives the rank and keeps writing
      // must not hold this loop (its output goes on through the armed readers, under flow control).
      for (int i = 0; i < kDrainChunks && read_once(r, OutputStream::kStdout, false); ++i) {
      }
      for (int i = 0; i < kDrainChunks && read_once(r, OutputStream::kStderr, false); ++i) {
      }
      ExitedMsg m{r.rank, 0, 0, {}};
      if (WIFEXITED(status)) m.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) {
        m.signal = WTERMSIG(status);
        m.exit_code = 128 + m.signal;
      }
      send(m);
    }
  }
};

Agent::Agent(UniqueFd control_in, UniqueFd control_out)
    : impl_(std::make_unique<Impl>(std::move(control_in), std::move(control_out))) {}

Agent::~Agent() = default;

int Agent::run() { return impl_->run(); }

}  // namespace hvrun

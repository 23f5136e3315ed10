#include "launcher/job.hpp"

#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <utility>  // before Asio, see design notes
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <spdlog/spdlog.h>

#include "agent/control_message.hpp"
#include "agent/error.hpp"
#include "agent/duration_text.hpp"
#include "agent/frame_channel.hpp"
#include "agent/job_secret.hpp"
#include "agent/rank_process.hpp"
#include "hvrun/version.hpp"
#include "launcher/host_locality.hpp"
#include "launcher/local_agent.hpp"
#include "launcher/output_mux.hpp"
#include "launcher/rank_env.hpp"
#include "launcher/rank_plan.hpp"

extern char** environ;

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kResolveTimeout{5000};
// After SIGKILL, how long agents get to report their ranks' exits before hvrun stops waiting.
constexpr milliseconds kAfterKillSlack{1000};
constexpr milliseconds kShutdownTimeout{2000};

std::map<std::string, std::string> launcher_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

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
    std::unique_ptr<LocalAgent> local;
    std::unique_ptr<FrameChannel> channel;
    std::optional<HelloMsg> hello;
    std::unique_ptr<asio::steady_timer> watchdog;
    bool closed = false;
  };
  struct RankState {
    std::size_t host = 0;  // into hosts
    bool exited = false;
  };
  enum class Phase { kStarting, kRunning, kStopping, kShuttingDown, kDone };

  explicit Impl(LaunchOptions o)
      : options(std::move(o)),
        plan(options.hosts, options.np, options.no_oversubscribe),
        signals(io, SIGINT, SIGTERM),
        deadline(io),
        heartbeat_timer(io),
        secret(JobSecret::generate()) {}

  LaunchOptions options;
  RankPlan plan;
  asio::io_context io;
  asio::signal_set signals;
  asio::steady_timer deadline;
  asio::steady_timer heartbeat_timer;
  JobSecret secret;
  std::vector<Host> hosts;
  std::vector<RankState> ranks;
  std::unique_ptr<OutputMux> output;
  Phase phase = Phase::kStarting;
  int exit_code = kExitOk;
  bool failure_reported = false;
  int exited_count = 0;
  int interrupts = 0;

  int run() {
    if (plan.oversubscribed())
      spdlog::warn("hvrun: -np {} exceeds the {} slots of the host list; hosts run more ranks than slots "
                   "(use --no-oversubscribe to make this an error)",
                   plan.size(), plan.total_slots());
    if (options.dry_run) return dry_run();
    output = std::make_unique<OutputMux>(
        plan.size(), OutputOptions{options.output_filename, options.prefix_timestamp, 1, 2, 10});
    start_agents();
    signals.async_wait([this](auto ec, int sig) { on_signal(ec, sig); });
    arm_deadline(options.start_timeout, [this] { on_start_timeout(); });
    io.run();
    for (auto& h : hosts)
      if (h.local) h.local->reap(kShutdownTimeout);
    return exit_code;
  }

  // ---- start-up ----------------------------------------------------------------------------------

  void start_agents() {
    std::vector<std::string> names;
    for (const auto& hp : plan.hosts()) names.push_back(hp.host);
    const auto local = find_local_hosts(names, kResolveTimeout);
    std::vector<std::string> remote;
    for (std::size_t i = 0; i < plan.hosts().size(); ++i)
      if (plan.hosts()[i].local_size > 0 && !local[i]) remote.push_back(plan.hosts()[i].host);
    if (!remote.empty())
      throw UsageError("-H: remote hosts are not supported by this build (" + remote.front() +
                       "); run on localhost only");

    ranks.resize(plan.size());
    const std::string agent_path = default_agent_path();
    for (std::size_t i = 0; i < plan.hosts().size(); ++i) {
      const HostPlan& hp = plan.hosts()[i];
      if (hp.local_size == 0) continue;
      Host h;
      h.plan_index = i;
      h.name = hp.host;
      h.local = std::make_unique<LocalAgent>(agent_path);
      UniqueFd fd = h.local->take_channel();
      UniqueFd wfd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
      if (!wfd) throw_errno("fcntl(F_DUPFD_CLOEXEC)", "channel to the agent on " + hp.host);
      h.channel = std::make_unique<FrameChannel>(io, std::move(fd), std::move(wfd), "agent on " + hp.host);
      for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r) ranks[r].host = hosts.size();
      hosts.push_back(std::move(h));
    }
    for (std::size_t i = 0; i < hosts.size(); ++i) attach(i);
    send_heartbeats();
  }

  // Starts the conversation with the agent of hosts[i], whose channel is in place.
  void attach(std::size_t i) {
    Host& h = hosts[i];
    h.watchdog = std::make_unique<asio::steady_timer>(io);
    h.channel->start({
        .on_frame = [this, i](Frame&& f) { on_frame(i, std::move(f)); },
        .on_closed = [this, i](const std::string& error) { on_agent_closed(i, error); },
        .on_drained = {},
    });
    h.channel->send(FrameType::kControl,
                    encode_control(JobMsg{secret.hex(), static_cast<int>(options.heartbeat_timeout.count())}));
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
        if (!h.closed) h.channel->send(FrameType::kControl, encode_control(HeartbeatMsg{}));
      send_heartbeats();
    });
  }

  void on_hello(std::size_t i, HelloMsg m) {
    Host& h = hosts[i];
    if (h.hello) throw ProtocolError(h.channel->peer() + ": a second hello");
    if (m.version != kVersion)
      throw ProtocolError(h.channel->peer() + " is version " + m.version + ", hvrun is " + kVersion +
                          "; install the same hvrun version on every host");
    spdlog::info("hvrun: agent on {} is up (hostname {}, pid {})", h.name, m.hostname, m.pid);
    h.hello = std::move(m);
    for (const auto& other : hosts)
      if (!other.hello) return;
    launch();
  }

  JobNetwork network() const {
    JobNetwork net;
    net.hosts.resize(plan.hosts().size());
    for (const Host& h : hosts)
      net.hosts[h.plan_index] = HostNetwork{h.hello->hostname, "lo", "127.0.0.1"};
    net.master_addr = "127.0.0.1";
    net.master_port = hosts.at(ranks.at(0).host).hello->free_port;
    return net;
  }

  std::map<std::string, std::string> base_environment() const {
    auto env = launcher_environment();
    for (const auto& [name, value] : options.env) {
      if (value) {
        env[name] = *value;
      } else if (!env.count(name)) {
        spdlog::warn("hvrun: -x {}: not set in hvrun's environment, so not passed to the ranks", name);
      }
    }
    return env;
  }

  void launch() {
    const JobNetwork net = network();
    const auto env = base_environment();
    const std::string cwd = current_directory();
    for (Host& h : hosts) {
      const HostPlan& hp = plan.hosts()[h.plan_index];
      LaunchMsg m{h.name, cwd, options.command, env, {}};
      for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r)
        m.ranks.push_back(RankLaunch{r, rank_environment(plan.rank(r), net)});
      h.channel->send(FrameType::kControl, encode_control(m));
    }
    phase = Phase::kRunning;
    deadline.cancel();
    spdlog::info("hvrun: started {} ranks on {} hosts", plan.size(), hosts.size());
  }

  void on_start_timeout() {
    std::string missing;
    for (const Host& h : hosts)
      if (!h.hello) missing += (missing.empty() ? "" : ", ") + h.name;
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
        output->write(c.rank, c.stream, c.bytes);
        return;
      }
      std::visit([&](auto&& m) { handle(i, std::move(m)); }, decode_control(f.payload, h.channel->peer()));
    } catch (const ProtocolError& e) {
      h.channel->close();
      on_agent_closed(i, e.what());
    }
  }

  void check_rank_of(std::size_t i, int rank) const {
    if (rank < 0 || rank >= plan.size() || ranks[rank].host != i)
      throw ProtocolError(hosts[i].channel->peer() + ": message about rank " + std::to_string(rank) +
                          ", which is not on that host");
  }

  void handle(std::size_t i, HelloMsg m) { on_hello(i, std::move(m)); }
  void handle(std::size_t, HeartbeatMsg) {}

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
    if (exited_count == plan.size()) shut_down();
  }

  void handle(std::size_t i, FatalMsg m) { fail_job(hosts[i].name + ": " + m.error); }

  template <typename M>
  void handle(std::size_t i, M&&) {
    throw ProtocolError(hosts[i].channel->peer() + ": unexpected control message");
  }

  void report_rank_failure(std::size_t i, const ExitedMsg& m) {
    failure_reported = true;
    exit_code = !m.error.empty() ? kExitCannotExecute : m.exit_code;
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
    h.watchdog->cancel();
    // Ranks the agent never reported are gone with it: it kills them when its channel closes.
    const HostPlan& hp = plan.hosts()[h.plan_index];
    for (int r = hp.first_rank; r < hp.first_rank + hp.local_size; ++r)
      if (!ranks[r].exited) {
        ranks[r].exited = true;
        ++exited_count;
      }
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) {
      maybe_done();
      return;
    }
    fail_job("lost the agent on " + h.name + (error.empty() ? std::string(": it exited") : ": " + error));
    if (exited_count == plan.size()) shut_down();
  }

  void fail_job(const std::string& why) {
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) return;
    if (!failure_reported) {
      failure_reported = true;
      exit_code = kExitLaunchFailed;
      spdlog::error("hvrun: {}", why);
    }
    if (phase == Phase::kStarting) return shut_down();
    stop_ranks(options.kill_grace);
  }

  void on_signal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    ++interrupts;
    if (!failure_reported) {
      failure_reported = true;
      exit_code = 128 + sig;
      spdlog::error("hvrun: received {}; stopping all ranks", signal_name(sig));
    }
    if (phase == Phase::kStarting) {
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
      if (!h.closed)
        h.channel->send(FrameType::kControl, encode_control(TerminateMsg{static_cast<int>(grace.count())}));
    arm_deadline(grace + kAfterKillSlack, [this] {
      spdlog::warn("hvrun: some agents did not confirm that their ranks ended; closing their channels");
      shut_down();
    });
  }

  void shut_down() {
    if (phase == Phase::kShuttingDown || phase == Phase::kDone) return;
    phase = Phase::kShuttingDown;
    for (Host& h : hosts)
      if (!h.closed) h.channel->send(FrameType::kControl, encode_control(ShutdownMsg{}));
    arm_deadline(kShutdownTimeout, [this] { finish(); });
    maybe_done();
  }

  void maybe_done() {
    for (const Host& h : hosts)
      if (!h.closed) return;
    finish();
  }

  void finish() {
    phase = Phase::kDone;
    for (Host& h : hosts) {
      h.channel->close();
      if (h.watchdog) h.watchdog->cancel();
    }
    heartbeat_timer.cancel();
    deadline.cancel();
    signals.cancel();
    io.stop();
  }

  template <typename F>
  void arm_deadline(milliseconds after, F on_expiry) {
    deadline.expires_after(after);
    deadline.async_wait([on_expiry](auto ec) {
      if (!ec) on_expiry();
    });
  }

  // ---- dry run -----------------------------------------------------------------------------------

  int dry_run() {
    std::cout << "# hvrun dry run: " << plan.size() << " ranks on " << plan.hosts().size() << " hosts\n";
    JobNetwork net;
    for (const auto& hp : plan.hosts()) {
      std::cout << "# host " << hp.host << ": slots " << hp.slots;
      if (hp.local_size > 0)
        std::cout << ", ranks " << hp.first_rank << "-" << hp.first_rank + hp.local_size - 1 << "\n";
      else
        std::cout << ", no ranks\n";
      net.hosts.push_back(HostNetwork{hp.host, "<chosen at launch>", "<chosen at launch>"});
    }
    net.master_addr = "<rank 0's host's address>";
    std::cout << "# command:";
    for (const auto& a : options.command) std::cout << ' ' << a;
    std::cout << "\n";
    for (int r = 0; r < plan.size(); ++r) {
      for (const auto& [k, v] : rank_environment(plan.rank(r), net))
        std::cout << '[' << r << "] " << k << '=' << (k == "MASTER_PORT" ? "<free port picked at launch>" : v) << "\n";
    }
    for (const auto& [name, value] : options.env)
      std::cout << "# -x " << name << (value ? "=" + *value : std::string(" (from hvrun's environment)")) << "\n";
    return kExitOk;
  }
};

Job::Job(LaunchOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Job::~Job() = default;
int Job::run() { return impl_->run(); }

}  // namespace hvrun

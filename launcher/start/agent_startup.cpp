#include "launcher/start/agent_startup.hpp"

#include <boost/asio/steady_timer.hpp>
#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"
#include "hvrun/version.hpp"
#include "launcher/output/status_line.hpp"
#include "launcher/start/connect_progress.hpp"
#include "launcher/start/connector.hpp"
#include "launcher/start/host_locality.hpp"
#include "launcher/start/same_host.hpp"

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

std::vector<JobHost> job_hosts(const RankPlan& plan, milliseconds resolve_timeout) {
  std::vector<std::string> names;
  for (const auto& hp : plan.hosts()) names.push_back(hp.host);
  const auto local = find_local_hosts(names, resolve_timeout);
  std::vector<JobHost> hosts;
  for (std::size_t i = 0; i < plan.hosts().size(); ++i) {
    const HostPlan& hp = plan.hosts()[i];
    if (hp.local_size == 0) continue;
    JobHost h;
    h.plan_index = i;
    h.name = hp.host;
    h.is_local = local[i];
    hosts.push_back(std::move(h));
  }
  return hosts;
}

struct AgentStartup::Impl {
  Impl(asio::io_context& i, const LaunchOptions& o, const RankPlan& p, std::vector<JobHost>& h,
       std::chrono::steady_clock::time_point s, Hooks k)
      : io(i), options(o), plan(p), hosts(h), started(s), hooks(std::move(k)), progress_timer(io) {}

  asio::io_context& io;
  const LaunchOptions& options;
  const RankPlan& plan;
  std::vector<JobHost>& hosts;
  std::chrono::steady_clock::time_point started;
  Hooks hooks;
  std::unique_ptr<StatusLine> status;  // only when some host is remote
  asio::steady_timer progress_timer;
  std::unique_ptr<Connector> connector;  // last: destroyed first, so no late result reaches the job

  void start() {
    const bool any_remote = std::any_of(hosts.begin(), hosts.end(), [](const JobHost& h) { return !h.is_local; });
    if (any_remote) status = std::make_unique<StatusLine>(2);
    const std::string agent_path = default_agent_path();
    connector = std::make_unique<Connector>(
        io, Connector::host_agent_starter(options, agent_path),
        [this](std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
          on_connected(i, std::move(agent), error);
        },
        static_cast<std::size_t>(options.connect_concurrency),
        [this](std::size_t i) {
          if (hooks.turn && hooks.starting()) hooks.turn(i);
        },
        [this](std::size_t i) {
          hosts[i].shell_since = std::chrono::steady_clock::now();
          show_progress();
        });
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      JobHost& h = hosts[i];
      if (h.is_local) {
        h.local = std::make_unique<LocalAgent>(agent_path);
        hooks.attach(i, h.local->take_channel());
      } else {
        connector->connect(i, h.name);
      }
    }
  }

  void on_connected(std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
    JobHost& h = hosts[i];
    if (!error.empty()) {
      h.life.fail_start();
      h.connect_error = error;
      hooks.failed(i);
    } else {
      h.remote = std::move(agent);
      h.shell_time = h.remote->shell_time();
      if (hooks.starting())
        hooks.attach(i, h.remote->take_channel());
      else
        h.life.lose();  // the job ended its start-up meanwhile: the agent goes unheard
    }
    show_progress();
    if (!hooks.starting()) return;
    if (std::any_of(hosts.begin(), hosts.end(), [](const JobHost& x) { return x.life.starting(); })) return;
    hooks.connected();
  }

  void show_progress() {
    if (!status || !hooks.starting()) return;
    const auto elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
    status->show(progress_text(start_progress(hosts, elapsed)));
  }

  // Redraws the status line once a second from kNamePendingAfter on, so pending hosts get named even
  // when no event comes.
  void tick_progress(milliseconds after) {
    progress_timer.expires_after(after);
    progress_timer.async_wait([this](auto ec) {
      if (ec || !hooks.starting()) return;
      show_progress();
      tick_progress(milliseconds(1000));
    });
  }
};

AgentStartup::AgentStartup(asio::io_context& io, const LaunchOptions& options, const RankPlan& plan,
                           std::vector<JobHost>& hosts, std::chrono::steady_clock::time_point start, Hooks hooks)
    : impl_(std::make_unique<Impl>(io, options, plan, hosts, start, std::move(hooks))) {}
AgentStartup::~AgentStartup() = default;

void AgentStartup::start() {
  impl_->start();
  impl_->show_progress();
  if (impl_->status) impl_->tick_progress(kNamePendingAfter);
}

void greet(JobHost& h, HelloMsg m, const std::string& peer) {
  if (h.life.phase() != HostPhase::kAttached) throw ProtocolError(peer + ": a second hello");
  if (m.version != kVersion || m.control_version != kControlVersion) {
    // The control version is named only when it differs: builds of one release may speak different ones.
    const bool name_control = m.control_version != kControlVersion;
    const auto version = [name_control](const std::string& release, int control) {
      return name_control ? release + " (control protocol " + std::to_string(control) + ")" : release;
    };
    throw ProtocolError(peer + " is version " + version(m.version, m.control_version) + ", hvrun is " +
                        version(kVersion, kControlVersion) + "; install the same hvrun version on every host");
  }
  log_of(LogSubsys::kStart)
      .info("agent on {} is up (hostname {}, pid {}{})", h.name, m.hostname, m.pid,
            h.remote ? ", " + h.remote->agent_description() : std::string());
  h.master_port = m.free_port;
  h.hello = std::move(m);
  h.life.greet();
}

void accept_ready(JobHost& h, const ReadyMsg& m, bool needs_sync, bool wants_fingerprint, const std::string& peer) {
  if (h.life.phase() != HostPhase::kGreeted) throw ProtocolError(peer + ": ready out of turn");
  h.store_port = m.store_port;
  h.rank_library = m.rank_library;
  h.rank_stack_dir = m.stack_dir;
  h.life.ready(needs_sync, wants_fingerprint);
}

void AgentStartup::hello(std::size_t i, HelloMsg m, const std::string& peer) {
  clear_status();
  greet(impl_->hosts[i], std::move(m), peer);
  impl_->show_progress();
}

bool AgentStartup::all_up() const {
  for (const auto& h : impl_->hosts)
    if (!h.life.ready() && !h.life.ended()) return false;
  return true;
}

std::optional<std::string> AgentStartup::same_host() const {
  const auto& hosts = impl_->hosts;
  if (std::all_of(hosts.begin(), hosts.end(), [](const JobHost& h) { return h.is_local; })) return std::nullopt;
  std::vector<HostIdentity> ids;
  for (const JobHost& h : hosts)
    if (h.hello) ids.push_back(HostIdentity{h.name, impl_->plan.hosts()[h.plan_index].slots, h.hello->network_stack});
  return same_host_error(ids);
}

void AgentStartup::clear_status() {
  if (impl_->status) impl_->status->clear();
}

void AgentStartup::stop() { impl_->progress_timer.cancel(); }

}  // namespace hvrun

#include "launcher/job/elastic_admission.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/post.hpp>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/start/agent_startup.hpp"
#include "launcher/start/local_agent.hpp"

namespace hvrun {

using std::chrono::milliseconds;

namespace {

// A newcomer's agent has this long to reach the rendezvous (KnockMsg): a connect and one small
// request, which a host that passed its probes does in milliseconds unless something drops them.
constexpr milliseconds kKnockTimeout{5000};

// `f` once `after` has passed, unless `timer` is cancelled or armed anew first.
void arm(boost::asio::steady_timer& timer, milliseconds after, std::function<void()> f) {
  timer.expires_after(after);
  timer.async_wait([f = std::move(f)](auto ec) {
    if (!ec) f();
  });
}

}  // namespace

ElasticAdmission::ElasticAdmission(boost::asio::io_context& io, const LaunchOptions& options,
                                   std::vector<JobHost>& hosts, AgentLinks& links, ElasticHosts& pool,
                                   const ElasticPhase& phase, const SyncRun* sync, AgentTerms terms, Hooks hooks)
    : io_(io),
      options_(options),
      hosts_(hosts),
      links_(links),
      pool_(pool),
      phase_(phase),
      terms_(std::move(terms)),
      hooks_(std::move(hooks)),
      checks_(options, hosts, links, pool, phase, sync,
              NewcomerChecks::Hooks{.ask_fingerprint = hooks_.ask_fingerprint,
                                    .cwd = hooks_.cwd,
                                    .refuse = [this](std::size_t i, const std::string& why) { refuse(i, why); },
                                    .maybe_probe = [this] { maybe_probe(); }}),
      probe_timer_(io),
      link_timer_(io),
      link_test_(LinkTestStep::Hooks{
          .send = [this](std::size_t i, const LinkTestRequestMsg& m) { links_.send(i, m); },
          .arm_deadline = [this](milliseconds after, std::function<void()> f) { arm(link_timer_, after, std::move(f)); },
          .cancel_deadline = [this] { link_timer_.cancel(); },
          .going_on = [this] { return !phase_.stopping(); }}) {
  connector_ = std::make_unique<Connector>(
      io, Connector::host_agent_starter(options, default_agent_path()),
      [this](std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
        on_connected(i, std::move(agent), error);
      },
      static_cast<std::size_t>(options.connect_concurrency));
}

ElasticAdmission::~ElasticAdmission() = default;

// hosts[i] was lost or left out, and its agent is gone: when the discovery script lists the host again
// once its blacklisting is over (--blacklist-cooldown-range), it starts afresh (add_host), with a new
// agent, new probes and a new knock, as horovodrun starts a returning host's workers afresh. A lost
// host is blacklisted when its round ends; until then it stays out.
bool ElasticAdmission::gone_for_good(std::size_t i) const {
  const HostPhase p = hosts_[i].life.phase();
  return (p == HostPhase::kLost || p == HostPhase::kRefused) && members_[i].blacklisted && links_.closed(i);
}

bool ElasticAdmission::listed(const std::string& name) const {
  return index_of_.contains(name) && !gone_for_good(index_of_.at(name));
}

void ElasticAdmission::add_host(const std::string& name, bool is_local) {
  if (index_of_.contains(name)) log_of(LogSubsys::kStart).info("{} is listed again; it starts afresh", name);
  JobHost h;
  h.name = name;
  h.is_local = is_local;
  const std::size_t i = links_.add(name);
  index_of_[name] = i;
  hosts_.push_back(std::move(h));
  members_.emplace_back();
  log_of(LogSubsys::kStart).info("{}: starting its agent", name);
  if (hosts_[i].is_local) {
    hosts_[i].local = std::make_unique<LocalAgent>(default_agent_path());
    attach(i, hosts_[i].local->take_channel());
  } else {
    connector_->connect(i, name);
  }
}

void ElasticAdmission::attach(std::size_t i, UniqueFd fd) {
  hosts_[i].life.attach();
  links_.attach(i, std::move(fd),
                JobMsg{terms_.secret_hex, static_cast<int>(options_.heartbeat_timeout.count()), static_cast<int>(i), false,
                       terms_.stall_enabled, true, !options_.no_straggler_watch, ""});  // --mpi: no elastic jobs
}

void ElasticAdmission::on_connected(std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error) {
  JobHost& h = hosts_[i];
  if (!error.empty()) h.life.fail_start();
  if (phase_.stopping()) {
    if (error.empty()) h.life.lose();  // dropped unheard
    return;
  }
  if (!error.empty()) {
    h.connect_error = error;
    links_.mark_closed(i);
    refuse(i, error);
    return maybe_probe();
  }
  h.remote = std::move(agent);
  attach(i, h.remote->take_channel());
}

void ElasticAdmission::refuse(std::size_t i, const std::string& why) {
  hosts_[i].life.refuse();
  // Its agent has nothing to do: it goes (on_agent_closed then says nothing), so that nothing idles on
  // the host, and a later return of the host starts afresh (gone_for_good).
  if (links_.live(i)) links_.send(i, ShutdownMsg{});
  spdlog::warn("{} is left out of the elastic job: {}; the job goes on without it", hosts_[i].name, why);
  pool_.blacklist(hosts_[i].name, std::chrono::steady_clock::now());
  members_[i].blacklisted = true;
  hooks_.host_set_changed(HorovodHostUpdate::kRemoved);
}

void ElasticAdmission::blacklist(const std::string& host) {
  pool_.blacklist(host, std::chrono::steady_clock::now());
  members_[index_of_.at(host)].blacklisted = true;
  const auto until = pool_.cooldown_end(host);
  spdlog::warn("{} blacklisted {}", host,
               until ? "for " + seconds_text(std::chrono::duration_cast<milliseconds>(*until - std::chrono::steady_clock::now()))
                     : std::string("for the rest of the job (no --blacklist-cooldown-range)"));
  const std::size_t i = index_of_.at(host);
  if (links_.live(i)) links_.send(i, TerminateMsg{static_cast<int>(options_.kill_grace.count()), {}});
}

void ElasticAdmission::lose(std::size_t i) {
  if (hosts_[i].life.phase() == HostPhase::kKnocking) rendezvous_->forget_knock(members_[i].knock_token);
  hosts_[i].life.lose();
}

// Newcomers that are up are probed together with the hosts already in, once no other host is still
// starting its agent (so that a burst of new hosts is one round).
void ElasticAdmission::maybe_probe() {
  if (probing_ || phase_.stopping()) return;
  std::vector<std::size_t> newcomers;
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    const HostLife& life = hosts_[i].life;
    if ((!life.ready() && !life.ended()) || life.settling()) return;  // still starting
    if (life.phase() == HostPhase::kUp) newcomers.push_back(i);
  }
  if (newcomers.empty()) return;
  probed_ = newcomers;
  probing_ = std::make_unique<NicDiscovery>(
      io_, options_, hosts_, NicFilter::parse(options_.network_interfaces),
      NicDiscovery::Hooks{
          .probing = [this] { return probing_ != nullptr && !phase_.stopping(); },
          .arm_deadline = [this](milliseconds after, std::function<void()> f) { arm(probe_timer_, after, std::move(f)); },
          .cancel_deadline = [this] { probe_timer_.cancel(); },
          .send = [this](std::size_t i, const ProbeRequestMsg& m) { links_.send(i, m); },
          .decided = [this] { boost::asio::post(io_, [this] { on_probed(); }); }});
  try {
    probing_->start();
  } catch (const UsageError& e) {
    probing_.reset();
    for (std::size_t i : newcomers) refuse(i, e.what());
  }
}

void ElasticAdmission::on_probe_result(std::size_t i, const ProbeResultMsg& m) {
  if (probing_) probing_->add(i, m, links_.peer(i));
}

void ElasticAdmission::on_probed() {
  if (!probing_) return;
  for (std::size_t i : probed_) {
    if (hosts_[i].life.phase() != HostPhase::kUp) continue;  // lost meanwhile
    const auto choice = probing_->choice_of(i);
    if (!choice) {
      refuse(i, "none of its NICs reached the job's other hosts in the probes (hvrun --check-only -H " +
                    hosts_[i].name + ",... shows why)");
      continue;
    }
    try {
      knock(i, *choice);
    } catch (const Error& e) {
      refuse(i, e.what());
    }
  }
  probing_.reset();
  maybe_probe();  // hosts that came up during the round
}

// hosts[i] passed its probes: its NIC is fixed for the rest of the job. The rendezvous listens where
// its workers reach the launcher (the address its sshd saw hvrun come from), and its agent knocks
// there with a one-time token: the knock proves that the workers will get through, and shows the
// source address their connections arrive from, which a NAT on the way rewrites. The rendezvous
// answers only addresses knocked from (and loopback). Admission follows the knock's result.
void ElasticAdmission::knock(std::size_t i, const NicChoice& nic) {
  JobHost& h = hosts_[i];
  std::string addr = h.is_local ? "127.0.0.1" : h.hello->ssh_client_address;
  if (addr.empty())
    throw Error("hvrun does not know its own address as " + h.name +
                " sees it (no SSH_CONNECTION there: --rsh-agent?), so its workers could not reach the rendezvous");
  Member& m = members_[i];
  if (!rendezvous_) {
    rendezvous_ = std::make_unique<HorovodRendezvous>(
        io_, HorovodRendezvousOptions{addr, 0, {"127.0.0.1"}, {}, hooks_.rendezvous()});
    m.rendezvous_port = rendezvous_->port();
  } else {
    m.rendezvous_port = rendezvous_->listen_also(io_, addr);
  }
  m.rendezvous_addr = addr;
  m.nic = nic;
  m.knocked_from.clear();
  m.knock_token = HorovodRendezvous::new_knock_token();
  rendezvous_->expect_knock(m.knock_token, [this, i](const std::string& from) { members_[i].knocked_from = from; });
  links_.send(i, KnockMsg{addr, m.rendezvous_port, m.knock_token, static_cast<int>(kKnockTimeout.count())});
  h.life.knock();
}

void ElasticAdmission::on_knock_result(std::size_t i, const KnockResultMsg& r) {
  Member& m = members_[i];
  if (hosts_[i].life.phase() != HostPhase::kKnocking)
    throw ProtocolError(links_.peer(i) + ": a knock result out of turn");
  rendezvous_->forget_knock(m.knock_token);
  if (phase_.stopping()) return;
  const std::string where = m.rendezvous_addr + ":" + std::to_string(m.rendezvous_port);
  if (!r.ok || m.knocked_from.empty()) {
    m.nic.reset();
    return refuse(i, "its workers could not reach hvrun's rendezvous at " + where + " (" +
                         (r.ok ? std::string("the knock did not arrive") : r.detail) + "): let " + hosts_[i].name +
                         " connect to this machine's " + m.rendezvous_addr + " (a firewall here, or no route back)");
  }
  hosts_[i].life.admit();
  log_of(LogSubsys::kStart)
      .info("admitted {}: it uses {} {}; its workers reach the rendezvous at {} from {}", hosts_[i].name, m.nic->iface,
            m.nic->address, where, m.knocked_from);
  hooks_.host_set_changed(HorovodHostUpdate::kAdded);
}

void ElasticAdmission::measure_links(const std::vector<std::string>& world, std::function<void()> then) {
  std::vector<bool> in(hosts_.size(), false);
  for (const std::string& name : world) in[index_of_.at(name)] = true;
  bool remote = false;
  for (std::size_t i = 0; i < hosts_.size(); ++i) remote = remote || (in[i] && !hosts_[i].is_local);
  if (!options_.link_test || world.size() < 2 || !remote) return then();
  link_test_.start(hosts_, [this, in](std::size_t i) { return in[i] ? members_[i].nic : std::nullopt; }, std::move(then));
}

bool ElasticAdmission::usable(const std::string& host) const {
  const auto it = index_of_.find(host);
  if (it == index_of_.end()) return false;
  return hosts_[it->second].life.phase() == HostPhase::kAdmitted;
}

std::vector<HostSlots> ElasticAdmission::usable_hosts() const {
  std::vector<HostSlots> out;
  for (const HostSlots& h : pool_.available())
    if (usable(h.host)) out.push_back(h);
  return out;
}

bool ElasticAdmission::admitting() const {
  return probing_ || std::any_of(hosts_.begin(), hosts_.end(), [](const JobHost& h) {
           return h.life.starting() || h.life.settling() || h.life.phase() == HostPhase::kKnocking;
         });
}

void ElasticAdmission::new_world() { rendezvous_->clear_keys(); }

void ElasticAdmission::stop() {
  probe_timer_.cancel();
  link_timer_.cancel();
  probing_.reset();
}

void ElasticAdmission::close() {
  connector_.reset();
  if (rendezvous_) rendezvous_->close();
}

}  // namespace hvrun

#include "launcher/job/nic_discovery.hpp"

#include <boost/asio/post.hpp>
#include <algorithm>

#include "common/duration_text.hpp"
#include "common/log.hpp"
#include "launcher/job/probe_messages.hpp"
#include "launcher/nic/probe_peers.hpp"
#include "launcher/nic/probe_retry.hpp"

namespace hvrun {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

// Probes end by themselves within their timeout; the slack covers agents that are slow to say so.
constexpr milliseconds kProbeSlack{2000};

}  // namespace

struct NicDiscovery::Impl {
  Impl(asio::io_context& i, const LaunchOptions& o, const std::vector<JobHost>& h, NicFilter f, Hooks k,
       std::optional<NicCache> c)
      : io(i), options(o), hosts(h), filter(std::move(f)), hooks(std::move(k)), cache(std::move(c)) {}

  asio::io_context& io;
  const LaunchOptions& options;
  const std::vector<JobHost>& hosts;
  NicFilter filter;
  Hooks hooks;
  std::optional<NicCache> cache;
  std::string cache_key;                                  // set by start() when there is a cache
  std::optional<NicCache::Clock::time_point> cached_at;   // the choice came from the cache
  bool single_host = false;
  std::optional<ProbeRound> round;  // from start() on
  bool evaluation_pending = false;
  Clock::time_point started;
  Clock::time_point decided_at;
  milliseconds probe_ms{0};
  // The owner may destroy this object while a judgement it posted or its deadline is still queued in
  // the io_context (the elastic driver ends each admission round so); those then do nothing.
  std::shared_ptr<char> alive = std::make_shared<char>();

  // `f`, run later on the io_context's thread only while this object exists.
  template <typename F>
  auto while_alive(F f) {
    return [life = std::weak_ptr<char>(alive), f = std::move(f)]() mutable {
      if (!life.expired()) f();
    };
  }

  void start() {
    ProbeMembers members = probe_members(hosts);
    // Every host in the list is this machine (`-H localhost:2,127.0.0.1:2`): loopback is the NIC.
    single_host = std::all_of(hosts.begin(), hosts.end(), [](const JobHost& h) { return h.is_local; });
    const std::size_t peers = probe_peer_count(options.probe_peers, options.check_only);
    round.emplace(std::move(members.hosts), std::move(members.inventories), filter, single_host, peers,
                  !options.check_only);
    started = Clock::now();
    // Nothing to probe (one host, or all of them this machine): nothing to keep either.
    if (cache && !round->planned().empty() && try_cache()) return;
    log_of(LogSubsys::kNic)
        .info("probing {} addresses of {} hosts ({})", round->planned().size(), hosts.size(),
              probe_scope(peers, round->members().size()));
    send_probes(round->planned(), options.probe_timeout);
    if (round->planned().empty()) decide();
  }

  // Takes the round's outcome from the cache when it holds one for these hosts, NICs and flags; then the
  // choice is final at once (Hooks::decided) and nothing is probed.
  // --check-only takes nothing from the cache: it drops the entry a launch with these hosts and flags
  // would take, since one runs it when something is wrong (the failure reports say to).
  bool try_cache() {
    std::vector<std::string> stacks;
    for (const std::size_t h : round->members()) stacks.push_back(hosts[h].hello->network_stack);
    cache_key = NicCache::key(round->inventories(), stacks, options.network_interfaces,
                              probe_peer_count(options.probe_peers, false), single_host);
    if (options.check_only) {
      cache->forget(cache_key);
      cache_key.clear();
      return false;
    }
    const auto hit = cache->load(cache_key, round->members().size(), NicCache::Clock::now());
    if (!hit) return false;
    round->adopt(hit->selections);
    cached_at = hit->made;
    decided_at = Clock::now();
    probe_ms = std::chrono::duration_cast<milliseconds>(decided_at - started);
    const auto age = std::chrono::duration_cast<std::chrono::seconds>(NicCache::Clock::now() - hit->made);
    log_of(LogSubsys::kNic)
        .info("the NICs of these {} hosts as probed {} ago, from the probe cache {} "
              "(--disable-cache probes every launch)",
              hosts.size(), seconds_text(age), cache->dir());
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (auto c = round->choice_of(i))
        log_of(LogSubsys::kNic).info("{} uses {} {} ({}; probe cache)", hosts[i].name, c->iface, c->address, c->why);
    hooks.cancel_deadline();
    hooks.decided();
    return true;
  }

  // Sends each prober its share of `probes`, in the order given.
  void send_probes(const std::vector<ProbeRound::Probe>& probes, milliseconds timeout) {
    const auto requests = probe_requests(*round, probes, hosts, timeout);
    for (std::size_t m = 0; m < requests.size(); ++m)
      if (!requests[m].targets.empty()) hooks.send(round->members()[m], requests[m]);
    hooks.arm_deadline(timeout + kProbeSlack, while_alive([this] { decide(); }));
  }

  void add(std::size_t from, const ProbeResultMsg& m, const std::string& peer) {
    const bool complete = round->add(probe_result(*round, hosts, from, m, peer));
    // A NIC's next address, now that some prober missed the one before (ProbeRound::planned), with the
    // current attempt's timeout: the deadline send_probes re-arms then never ends that attempt early.
    if (const auto more = round->take_released(); !more.empty() && hooks.probing())
      send_probes(more, attempt_timeout(options.probe_timeout, round->attempts()));
    if (complete) return decide();
    if (!options.check_only && !evaluation_pending) {
      // Results come in bursts; judge once per burst.
      evaluation_pending = true;
      asio::post(io, while_alive([this] {
        evaluation_pending = false;
        if (hooks.probing() && round->decision_is_final()) decide();
      }));
    }
  }

  // The round's outcome as the cache keeps it: each member's choice and usable NICs.
  std::vector<CachedSelection> cached_selections() const {
    std::vector<CachedSelection> out;
    for (const HostSelection& s : round->selections()) {
      CachedSelection c{*s.selected, {}};
      for (const NicVerdict& v : s.nics)
        if (v.usable) c.usable.push_back(NicChoice{v.iface, v.address, {}});
      out.push_back(std::move(c));
    }
    return out;
  }

  void decide() {
    if (!hooks.probing()) return;
    hooks.cancel_deadline();
    round->decide();
    // A probe is not a verdict: probes that timed out towards a host without a usable NIC go again
    // (probe_retry.hpp), each attempt with a longer timeout.
    if (const auto again = round->retry(); !again.empty()) {
      const milliseconds timeout = attempt_timeout(options.probe_timeout, round->attempts());
      log_of(LogSubsys::kNic)
          .info("probing {} addresses again (attempt {} of {}, timeout {})", again.size(), round->attempts(),
                kMaxProbeAttempts, seconds_text(timeout));
      return send_probes(again, timeout);
    }
    decided_at = Clock::now();
    probe_ms = std::chrono::duration_cast<milliseconds>(decided_at - started);
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (auto c = round->choice_of(i))
        log_of(LogSubsys::kNic).info("{} uses {} {} ({})", hosts[i].name, c->iface, c->address, c->why);
    if (!cache_key.empty() && round->every_member_chosen())
      cache->store(cache_key, cached_selections(), NicCache::Clock::now());
    hooks.decided();
  }
};

NicDiscovery::NicDiscovery(asio::io_context& io, const LaunchOptions& options, const std::vector<JobHost>& hosts,
                           NicFilter filter, Hooks hooks, std::optional<NicCache> cache)
    : impl_(std::make_unique<Impl>(io, options, hosts, std::move(filter), std::move(hooks), std::move(cache))) {}
NicDiscovery::~NicDiscovery() = default;

void NicDiscovery::start() { impl_->start(); }
void NicDiscovery::add(std::size_t from, const ProbeResultMsg& m, const std::string& peer) { impl_->add(from, m, peer); }
void NicDiscovery::decide() { impl_->decide(); }

std::optional<NicCache::Clock::time_point> NicDiscovery::cached_at() const { return impl_->cached_at; }

void NicDiscovery::forget_cached() const {
  if (!impl_->cache_key.empty()) impl_->cache->forget(impl_->cache_key);
}

const ProbeRound* NicDiscovery::round() const { return impl_->round ? &*impl_->round : nullptr; }

std::optional<NicChoice> NicDiscovery::choice_of(std::size_t i) const {
  return impl_->round ? impl_->round->choice_of(i) : std::nullopt;
}

bool NicDiscovery::all_chosen() const {
  for (std::size_t i = 0; i < impl_->hosts.size(); ++i)
    if (!choice_of(i)) return false;
  return true;
}

NicDiscovery::Clock::time_point NicDiscovery::decided_at() const { return impl_->decided_at; }

CheckInput NicDiscovery::report_base() const {
  return CheckInput{{}, impl_->probe_ms, impl_->filter, impl_->single_host, {}, {}};
}

}  // namespace hvrun

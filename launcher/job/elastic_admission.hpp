#pragma once
// The hosts an elastic job meets (ElasticJob, elastic_job.cpp), from the discovery to their admission:
// each listed host gets an agent (add_host), then --sync's files and the check of what its workers would
// run (its fingerprint, compared with the hosts already in: NewcomerChecks), then its NICs probed with the
// hosts already in (one round for every newcomer up at the time), then a knock at the Gloo rendezvous,
// which this class serves for every host. A host that fails a step is refused (refuse(): left out and
// blacklisted for its cooldown); one that passes them is admitted, and usable_hosts() names it. Each
// change of the usable hosts goes to Hooks::host_set_changed. What the workers then do is ElasticRounds'.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/control_message.hpp"
#include "common/horovod_rendezvous.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/elastic_phase.hpp"
#include "launcher/job/elastic_newcomer_checks.hpp"
#include "launcher/job/link_test_step.hpp"
#include "launcher/job/nic_discovery.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/nic/nic_selector.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/connector.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class ElasticAdmission {
 public:
  struct Hooks {
    std::function<void(HorovodHostUpdate)> host_set_changed;  // the usable hosts may have changed
    std::function<void(std::size_t)> ask_fingerprint;          // asks hosts[i] what its ranks would run
    std::function<const std::string&()> cwd;                   // the ranks' working directory
    std::function<HorovodElasticHooks()> rendezvous;           // the workers' requests, asked when it opens
  };
  // What each agent is told in its JobMsg beside its index.
  struct AgentTerms {
    std::string secret_hex;
    bool stall_enabled = false;
  };

  // `hosts`, `links`, `pool` and `phase` are the job's (they outlive this object); `sync` is null
  // without --sync. Makes the connector for the hosts' agents.
  ElasticAdmission(boost::asio::io_context& io, const LaunchOptions& options, std::vector<JobHost>& hosts,
                   AgentLinks& links, ElasticHosts& pool, const ElasticPhase& phase, const SyncRun* sync,
                   AgentTerms terms, Hooks hooks);
  ~ElasticAdmission();
  ElasticAdmission(const ElasticAdmission&) = delete;
  ElasticAdmission& operator=(const ElasticAdmission&) = delete;

  // A host the discovery lists: an agent for it, unless it is in the job or may still return to it
  // (listed()). `is_local`: the host is this machine (DiscoveryRun::local), so its agent runs here over
  // pipes.
  void add_host(const std::string& name, bool is_local);
  bool listed(const std::string& name) const;  // met, and not gone for good

  // The agents' messages on the way to admission: the checks first (NewcomerChecks), then the probes.
  void on_ready(std::size_t i, const ReadyMsg& m) { checks_.on_ready(i, m); }
  void on_synced(std::size_t i) { checks_.on_synced(i); }  // SyncRun::Hooks::synced
  void on_fingerprint(std::size_t i, FingerprintMsg m) { checks_.on_fingerprint(i, std::move(m)); }
  void on_probe_result(std::size_t i, const ProbeResultMsg& m);
  void on_knock_result(std::size_t i, const KnockResultMsg& r);
  void on_link_result(std::size_t i, const LinkTestResultMsg& m) { link_test_.add(i, m, links_.peer(i)); }

  // The first world's links, before its first worker (docs/DESIGN.md §5.6): the admitted `world` hosts'
  // NICs measured, each towards the next in meeting order, degraded ones warned about, then `then`; at
  // once under --no-link-test, for a single host or when every host is this machine. Once per job:
  // hosts admitted later are not measured.
  void measure_links(const std::vector<std::string>& world, std::function<void()> then);
  bool measuring_links() const { return link_test_.running(); }

  // hosts[i] is never used: why, for the user, and the job goes on without it.
  void refuse(std::size_t i, const std::string& why);
  // Probes the newcomers that are up, unless a round is under way or a host is still starting.
  void maybe_probe();
  // horovodrun: the host is out (for its cooldown) and its workers are stopped (the host event).
  void blacklist(const std::string& host);
  // hosts[i]'s agent is gone (HostLife::lose), a knock under way forgotten.
  void lose(std::size_t i);

  // The discovered hosts that are admitted, with their slots, in the pool's order.
  std::vector<HostSlots> usable_hosts() const;
  // A host is starting its agent, being checked, probed or knocking.
  bool admitting() const;
  bool knows(const std::string& host) const { return index_of_.contains(host); }
  std::size_t index_of(const std::string& host) const { return index_of_.at(host); }
  // An admitted host's NIC, and where its workers reach the rendezvous.
  const std::optional<NicChoice>& nic_of(std::size_t i) const { return members_[i].nic; }
  const std::string& rendezvous_addr(std::size_t i) const { return members_[i].rendezvous_addr; }
  int rendezvous_port(std::size_t i) const { return members_[i].rendezvous_port; }

  void new_world();  // the rendezvous' keys of the last world go
  void stop();       // no more probes
  void close();      // no more agents started; the rendezvous closes

 private:
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

  bool gone_for_good(std::size_t i) const;
  void attach(std::size_t i, UniqueFd fd);
  void on_connected(std::size_t i, std::shared_ptr<HostAgent> agent, const std::string& error);
  void on_probed();
  void knock(std::size_t i, const NicChoice& nic);
  bool usable(const std::string& host) const;

  boost::asio::io_context& io_;
  const LaunchOptions& options_;
  std::vector<JobHost>& hosts_;
  AgentLinks& links_;
  ElasticHosts& pool_;
  const ElasticPhase& phase_;
  AgentTerms terms_;
  Hooks hooks_;
  NewcomerChecks checks_;
  boost::asio::steady_timer probe_timer_;  // the probe round's deadline
  boost::asio::steady_timer link_timer_;   // the link test's
  LinkTestStep link_test_;
  std::vector<Member> members_;            // parallel to hosts: every host met, in order
  std::map<std::string, std::size_t> index_of_;
  std::unique_ptr<HorovodRendezvous> rendezvous_;
  std::unique_ptr<NicDiscovery> probing_;  // the admission round under way
  std::vector<std::size_t> probed_;        // the newcomers it decides on
  std::unique_ptr<Connector> connector_;
};

}  // namespace hvrun

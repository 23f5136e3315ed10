#include "launcher/job/elastic_newcomer_checks.hpp"

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "launcher/start/agent_startup.hpp"

namespace hvrun {

NewcomerChecks::NewcomerChecks(const LaunchOptions& options, std::vector<JobHost>& hosts, AgentLinks& links,
                               const ElasticHosts& pool, const ElasticPhase& phase, const SyncRun* sync, Hooks hooks)
    : options_(options),
      hosts_(hosts),
      links_(links),
      pool_(pool),
      phase_(phase),
      sync_(sync),
      hooks_(std::move(hooks)) {}

void NewcomerChecks::on_ready(std::size_t i, const ReadyMsg& m) {
  // Before its probes, a newcomer gets --sync's files and says what its workers would run (compared
  // with the hosts already in: on_fingerprint()), as a fixed job's hosts do before any rank starts.
  const bool needs_sync = sync_ && sync_->needs(hosts_[i]);
  accept_ready(hosts_[i], m, needs_sync, !options_.command.empty(), links_.peer(i));
  if (needs_sync)
    links_.send(i, sync_->check());
  else
    hooks_.ask_fingerprint(i);
  hooks_.maybe_probe();
}

// hosts[i] holds every --sync file: SyncRun::Hooks.
void NewcomerChecks::on_synced(std::size_t i) {
  if (hosts_[i].life.phase() == HostPhase::kFingerprinting) return hooks_.ask_fingerprint(i);
  hooks_.maybe_probe();
}

HostFingerprint NewcomerChecks::print_of(std::size_t i) const {
  int slots = 0;
  for (const HostSlots& h : pool_.available())
    if (h.host == hosts_[i].name) slots = h.slots;
  const FingerprintMsg& f = *hosts_[i].fingerprint;
  return {hosts_[i].name, slots, sync_ && !hosts_[i].is_local ? after_sync(f, sync_->manifest()) : f};
}

// What would fail at once on hosts[i] refuses it, naming the path; how it differs from the hosts
// already in (or checked before it) is named, as for a fixed job's hosts.
void NewcomerChecks::on_fingerprint(std::size_t i, FingerprintMsg m) {
  JobHost& h = hosts_[i];
  if (h.life.phase() != HostPhase::kFingerprinting) throw ProtocolError(links_.peer(i) + ": fingerprint out of turn");
  h.fingerprint = std::move(m);
  h.life.fingerprinted();
  if (phase_.stopping()) return;
  const FingerprintReport alone = compare_fingerprints({print_of(i)}, options_.command, hooks_.cwd());
  if (!alone.refusals.empty()) {
    std::string why;
    for (const std::string& line : alone.refusals) why += (why.empty() ? "" : "; ") + line;
    hooks_.refuse(i, why);
    return hooks_.maybe_probe();
  }
  std::vector<HostFingerprint> prints;
  for (std::size_t k = 0; k < hosts_.size(); ++k)
    if (k != i && hosts_[k].fingerprint && !hosts_[k].life.ended()) prints.push_back(print_of(k));
  if (!prints.empty()) {
    prints.push_back(print_of(i));
    for (const std::string& line : compare_fingerprints(prints, options_.command, hooks_.cwd()).differences)
      spdlog::warn("hosts differ: {}", line);
  }
  hooks_.maybe_probe();
}

}  // namespace hvrun

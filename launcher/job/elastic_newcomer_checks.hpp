#pragma once
// A newcomer's checks in an elastic job (ElasticAdmission), between its agent's ready and its probes, as a
// fixed job's hosts get them before any rank starts: with --sync, SyncRun copies the files it lacks; then
// what its workers would run (its fingerprint) is compared with the hosts already in (or checked before
// it). What would fail at once there (a script missing) refuses the host, naming the path; how it differs
// (another torch, a stale script) is a warning naming it. The probes that follow are ElasticAdmission's.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/check/fingerprint_report.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/elastic_phase.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class NewcomerChecks {
 public:
  struct Hooks {
    std::function<void(std::size_t)> ask_fingerprint;             // asks hosts[i] what its ranks would run
    std::function<const std::string&()> cwd;                      // the ranks' working directory
    std::function<void(std::size_t, const std::string&)> refuse;  // hosts[i] is left out, for `why`
    std::function<void()> maybe_probe;                            // the newcomers that are up may be probed
  };

  // Everything referenced is the job's and outlives this object; `sync` is null without --sync.
  NewcomerChecks(const LaunchOptions& options, std::vector<JobHost>& hosts, AgentLinks& links,
                 const ElasticHosts& pool, const ElasticPhase& phase, const SyncRun* sync, Hooks hooks);

  // The agents' messages on the way to the probes.
  void on_ready(std::size_t i, const ReadyMsg& m);
  void on_synced(std::size_t i);  // SyncRun::Hooks::synced
  void on_fingerprint(std::size_t i, FingerprintMsg m);

 private:
  HostFingerprint print_of(std::size_t i) const;

  const LaunchOptions& options_;
  std::vector<JobHost>& hosts_;
  AgentLinks& links_;
  const ElasticHosts& pool_;
  const ElasticPhase& phase_;
  const SyncRun* sync_;
  Hooks hooks_;
};

}  // namespace hvrun

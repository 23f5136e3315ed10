#include "launcher/job/job_launch.hpp"

#include <algorithm>
#include <iostream>
#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/rank_contract_names.hpp"
#include "launcher/base/exit_codes.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/check/check_run.hpp"
#include "launcher/check/fingerprint_report.hpp"
#include "launcher/job/rank_launch.hpp"
#include "launcher/ranks/horovod_rendezvous_plan.hpp"
#include "launcher/start/sync_manifest.hpp"

namespace hvrun {

using std::chrono::milliseconds;

JobLaunch::JobLaunch(boost::asio::io_context& io, const LaunchOptions& options, Job job, Hooks hooks)
    : options_(options),
      job_(job),
      hooks_(std::move(hooks)),
      link_test_(LinkTestStep::Hooks{
          .send = [this](std::size_t i, const LinkTestRequestMsg& m) { job_.links->send(i, m); },
          .arm_deadline = [this](milliseconds after, std::function<void()> f) { hooks_.arm_deadline(after, std::move(f)); },
          .cancel_deadline = [this] { hooks_.cancel_deadline(); },
          .going_on = [this] { return !job_.teardown.tearing_down(); }}) {
  nics_ = std::make_unique<NicDiscovery>(
      io, options, job_.hosts, NicFilter::parse(options.network_interfaces),
      NicDiscovery::Hooks{
          .probing = [this] { return job_.teardown.phase() == Phase::kProbing; },
          .arm_deadline = [this](milliseconds after, std::function<void()> f) { hooks_.arm_deadline(after, std::move(f)); },
          .cancel_deadline = [this] { hooks_.cancel_deadline(); },
          .send = [this](std::size_t i, const ProbeRequestMsg& m) { job_.links->send(i, m); },
          .decided = [this] { on_decided(); }},
      probe_cache());
}

JobLaunch::~JobLaunch() = default;

// A job that failed drops its probe cache entry: a NIC that began to drop packets looks the same to
// the cache's key, so the next launch must probe again rather than trust it.
int JobLaunch::ended(int exit_code) {
  if (exit_code == kExitOk) return exit_code;
  nics_->forget_cached();
  if (const auto made = nics_->cached_at())
    spdlog::warn("the NICs of this job came from the probe cache (probed {} before the launch); that entry is dropped, "
                 "so the next launch probes them again (--disable-cache probes every launch)",
                 seconds_text(std::chrono::duration_cast<milliseconds>(NicCache::Clock::now() - *made)));
  return exit_code;
}

std::size_t JobLaunch::probes_sent() const { return nics_->round() ? nics_->round()->probes_sent() : 0; }

// The probe cache a launch uses (--check-only only drops from it, nic_discovery.hpp): none under
// --disable-cache (or HVRUN_DISABLE_CACHE=1) or without a home directory to keep it in.
std::optional<NicCache> JobLaunch::probe_cache() const {
  if (options_.disable_cache) return std::nullopt;
  const auto dir = NicCache::default_dir();
  if (!dir) return std::nullopt;
  return NicCache(*dir);
}

// Each host's candidate addresses are probed by its probers (probe_peers.hpp: a bounded set for a
// launch, every other host for --check-only), all at once; then each host gets the NIC they all reached.
void JobLaunch::probe() {
  job_.teardown.advance(Phase::kProbing);
  try {
    nics_->start();
  } catch (const UsageError& e) {
    job_.teardown.record_failure(kExitUsage);
    spdlog::error("error: {}", e.what());
    return hooks_.shut_down();
  }
}

void JobLaunch::on_probe_result(std::size_t i, const ProbeResultMsg& m) {
  if (job_.teardown.phase() == Phase::kProbing) nics_->add(i, m, job_.links->peer(i));
}

// Every host that is up has its --sync files and has said what its ranks would run (or the job has
// no command).
bool JobLaunch::fingerprints_in() const {
  return std::none_of(job_.hosts.begin(), job_.hosts.end(), [](const JobHost& h) { return h.life.settling(); });
}

// The NICs are decided and every fingerprint that comes is in (a --sync copy or a fingerprint came
// after the decision): on_decided() carries on where it waited.
bool JobLaunch::ready_to_decide() const { return nics_decided_ && fingerprints_in(); }

void JobLaunch::on_fingerprint(std::size_t i, FingerprintMsg m) {
  JobHost& h = job_.hosts[i];
  if (h.life.phase() != HostPhase::kFingerprinting) throw ProtocolError(job_.links->peer(i) + ": fingerprint out of turn");
  h.fingerprint = std::move(m);
  h.life.fingerprinted();
  // The job may have begun to end while it waited (a signal, a lost host): then nothing starts.
  if (ready_to_decide() && !job_.teardown.tearing_down()) on_decided();
}

void JobLaunch::on_synced(std::size_t i) {
  hooks_.ask_fingerprint(i);
  if (ready_to_decide()) on_decided();
}

// The hosts' fingerprints compared: differences are warned about; what would fail at once ends the
// job before any rank starts (kExitUsage). False when the job must not go on.
bool JobLaunch::check_fingerprints() {
  if (options_.command.empty()) return true;
  const std::vector<JobHost>& hosts = job_.hosts;
  std::vector<HostFingerprint> prints;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].fingerprint)
      prints.push_back({hosts[i].name, ranks_on(hosts[i], job_.plan),
                        job_.sync && !hosts[i].is_local ? after_sync(*hosts[i].fingerprint, job_.sync->manifest())
                                                        : *hosts[i].fingerprint});
  const FingerprintReport report = compare_fingerprints(prints, options_.command, hooks_.cwd());
  for (const std::string& line : report.differences) spdlog::warn("hosts differ: {}", line);
  for (const std::string& line : report.refusals) spdlog::error("error: {}", line);
  if (report.refusals.empty() && report.differences.empty()) agreed_ = report.same;
  return report.refusals.empty();
}

void JobLaunch::on_decided() {
  job_.timings.decided = nics_->decided_at();
  nics_decided_ = true;
  if (!fingerprints_in()) return await_fingerprints();
  hooks_.cancel_deadline();
  const bool runnable = check_fingerprints();
  if (options_.check_only) {
    return measure_links([this, runnable] {
      report_check();
      if (!runnable) job_.teardown.set_exit_code(kExitUsage);
      if (!agreed_.empty() && !options_.json) std::cout << "\nwhat the ranks would run, on every host: " << agreed_ << "\n";
    });
  }
  if (!runnable) {
    job_.teardown.record_failure(kExitUsage);
    return hooks_.shut_down();
  }
  if (!nics_->all_chosen()) {
    job_.teardown.record_failure(kExitLaunchFailed);
    spdlog::error("{}", unusable_text(nic_report(), options_.probe_timeout, nics_->round()->attempts()));
    return hooks_.shut_down();
  }
  measure_links([this] {
    // --mpi: mpirun's processes need no Gloo rendezvous.
    if (options_.mpi) return prepare_mpirun();
    serve_horovod_rendezvous();
  });
}

// Each host's chosen NIC towards its ring neighbour's, all at once (link_test_step.hpp).
void JobLaunch::measure_links(std::function<void()> then) {
  if (!options_.link_test || nics_->report_base().single_host || job_.hosts.size() < 2) return then();
  job_.teardown.advance(Phase::kLinkTest);
  link_test_.start(job_.hosts, [this](std::size_t i) { return nics_->choice_of(i); }, std::move(then));
}

void JobLaunch::on_link_result(std::size_t i, const LinkTestResultMsg& m) {
  if (job_.teardown.phase() == Phase::kLinkTest) link_test_.add(i, m, job_.links->peer(i));
}

// Agents answer at once; the bound is for one whose interpreter hangs past kInterpreterTimeout, or
// whose --sync check hashes for that long. A host whose --sync files are being copied is bounded by
// its copy's own timeout (sync_timeout), so the wait goes on while one is.
void JobLaunch::await_fingerprints() {
  hooks_.arm_deadline(options_.start_timeout, [this] {
    const std::vector<JobHost>& hosts = job_.hosts;
    if (std::any_of(hosts.begin(), hosts.end(), [](const JobHost& h) { return h.life.phase() == HostPhase::kSyncing; }))
      return await_fingerprints();
    std::vector<std::string> silent;
    for (const JobHost& h : hosts)
      if (h.life.settling()) silent.push_back(h.name);
    hooks_.fail("no answer within " + seconds_text(options_.start_timeout) + " from " + fold_names(silent) + " on " +
                (std::any_of(hosts.begin(), hosts.end(), [](const JobHost& h) { return h.life.syncing(); })
                     ? "which --sync files they lack"
                     : "what the ranks would run there") +
                "; check those hosts");
  });
}

void JobLaunch::serve_horovod_rendezvous() {
  const std::vector<JobHost>& hosts = job_.hosts;
  const std::size_t r0 = rank0_host(hosts, job_.plan);
  const NicChoice c = *nics_->choice_of(r0);
  std::vector<std::vector<InterfaceInfo>> job_interfaces;
  for (const JobHost& h : hosts) job_interfaces.push_back(h.hello->interfaces);
  const auto p = plan_horovod_rendezvous(c.iface, c.address, hosts[r0].hello->interfaces, job_interfaces);
  if (!p) {
    spdlog::warn("{}'s NIC {} has no IPv4 address, and Horovod's Gloo rendezvous client speaks IPv4 only: "
                 "it is not served, so Horovod programs cannot start; choose a NIC with IPv4 "
                 "(--network-interface)", hosts[r0].name, c.iface);
    return launch();
  }
  horovod_rendezvous_addr_ = p->address;
  job_.teardown.advance(Phase::kRendezvous);
  job_.links->send(r0, HorovodRendezvousMsg{p->address, p->allowed_peers});
  hooks_.arm_deadline(options_.start_timeout, [this, r0] {
    hooks_.fail("the agent on " + job_.hosts[r0].name + " did not start Horovod's rendezvous within " +
                seconds_text(options_.start_timeout) + "; raise --start-timeout or check that host");
  });
}

void JobLaunch::forget_rendezvous() {
  horovod_rendezvous_addr_.reset();
  horovod_rendezvous_port_ = 0;
}

void JobLaunch::on_rendezvous_ready(std::size_t i, const HorovodRendezvousReadyMsg& m) {
  if (job_.teardown.tearing_down()) return;  // the job failed meanwhile
  if (job_.teardown.phase() != Phase::kRendezvous || i != rank0_host(job_.hosts, job_.plan))
    throw ProtocolError(job_.links->peer(i) + ": Horovod rendezvous ready out of turn");
  log_of(LogSubsys::kRendezvous)
      .info("Horovod's Gloo rendezvous is at {}:{} on {}", *horovod_rendezvous_addr_, m.port, job_.hosts[i].name);
  horovod_rendezvous_port_ = m.port;
  launch();
}

// --mpi: the agents' work ends with the choice; mpirun runs once they are gone (Job::run).
void JobLaunch::prepare_mpirun() {
  const std::string marker = mpi_marker_for(options_, job_.secret);
  const MpirunInput in = mpirun_input_for(job_.hosts, job_.plan, *nics_->round(), options_, marker);
  try {
    mpirun_ = mpirun_argv(in);
    spdlog::info("--mpi: {}", shell_line(*mpirun_));
  } catch (const Error& e) {
    job_.teardown.record_failure(kExitLaunchFailed);
    spdlog::error("{}", e.what());
  }
  if (mpirun_ && !marker.empty()) return hooks_.start_mpirun();
  hooks_.shut_down();
}

// The --check-only report of the probe round as it stands.
CheckReport JobLaunch::nic_report() const {
  CheckInput base = nics_->report_base();
  if (const LinkTestRun* links = link_test_.run()) {
    base.links = links->figures();
    base.link_hosts = links->hosts();
  }
  return check_report_of(job_.hosts, nics_->round(), std::move(base));
}

void JobLaunch::report_check() {
  job_.teardown.set_exit_code(print_check_report(nic_report(), options_));
  job_.teardown.mark_reported();
  hooks_.shut_down();
}

std::vector<std::string> JobLaunch::hosts_with_ranks() const {
  std::vector<std::string> names;
  for (const JobHost& h : job_.hosts)
    if (ranks_on(h, job_.plan) > 0) names.push_back(h.name);
  return names;
}

void JobLaunch::launch() {
  const JobRestarts& restarts = job_.restarts;
  const RankPlan& plan = job_.plan;
  const JobServices services{rank0_host(job_.hosts, plan),
                             job_.secret.store_token(),
                             horovod_rendezvous_addr_,
                             horovod_rendezvous_port_,
                             JobNetwork::Restarts{restarts.used(), restarts.max(), restarts.run_id()},
                             options_.role,
                             options_.torchrun_form && hooks_.env().local().count(rank_contract::kOmpNumThreads) == 0};
  const JobNetwork net = job_network(job_.hosts, plan, *nics_->round(), services);
  if (restarts.used() == 0) {
    warn_about_user_environment(hooks_.env(), *nics_->round());
    if (const std::string notice = omp_threads_notice(plan, net); !notice.empty()) spdlog::warn("{}", notice);
    if (!job_.output->log_run_dir().empty())
      spdlog::warn("every rank's output is written to {} (torchrun's layout, with the host)", job_.output->log_run_dir());
  }
  if (restarts.used() > 0) {  // the failed attempt's exits are all in: the new plan's
    hooks_.reassign();
    for (int r = 0; r < plan.size(); ++r) job_.output->restart(r);
  }
  for (int r = 0; r < plan.size(); ++r) {
    const RankInfo info = plan.rank(r);
    job_.output->place(r, info.local_rank, plan.hosts()[static_cast<std::size_t>(info.host_index)].host, restarts.used());
  }
  for (std::size_t i = 0; i < job_.hosts.size(); ++i)  // none to a lost host
    job_.links->send(i, launch_message(job_.hosts[i], plan, net, hooks_.env(), options_, hooks_.cwd()));
  job_.teardown.advance(Phase::kRunning);
  hooks_.cancel_deadline();
  if (restarts.used() > 0)
    spdlog::warn("restart {} of {}: {} ranks started again on {}, {} after the failure", restarts.used(),
                 restarts.max(), plan.size(), fold_names(hosts_with_ranks()),
                 seconds_text(std::chrono::duration_cast<milliseconds>(LaunchTimings::Clock::now() - restarts.since())));
  spdlog::info("started {} ranks on {} hosts", plan.size(), job_.hosts.size());
  hooks_.launched();
}

}  // namespace hvrun

#pragma once
// The fixed job's way from its agents up to its ranks running (Job, job.cpp): the probe round
// (NicDiscovery), the hosts' fingerprints compared (what would fail at once ends the job before any rank
// starts), the NICs decided, then Horovod's Gloo rendezvous served by rank 0's agent and every host's
// LaunchMsg sent; or, under --mpi, mpirun's command line; or, under --check-only, the report. A restart
// (JobRestarts) launches again through serve_horovod_rendezvous(). The phases are Teardown's; the job's
// deadline, failure and shutdown are the caller's (Hooks).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/control_message.hpp"
#include "common/job_secret.hpp"
#include "launcher/check/check_report.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/job/job_restarts.hpp"
#include "launcher/job/launch_timings.hpp"
#include "launcher/job/link_test_step.hpp"
#include "launcher/job/nic_discovery.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class JobLaunch {
 public:
  struct Hooks {
    // The job's one deadline: armed anew, or cancelled.
    std::function<void(std::chrono::milliseconds, std::function<void()>)> arm_deadline;
    std::function<void()> cancel_deadline;
    std::function<void(const std::string&)> fail;  // the job cannot go on
    std::function<void()> shut_down;
    std::function<const EnvPolicy&()> env;  // the ranks' environment policy
    std::function<const std::string&()> cwd;  // and working directory
    std::function<void(std::size_t)> ask_fingerprint;  // asks hosts[i] what its ranks would run
    std::function<void()> reassign;  // a restart's launch: the ranks' hosts from the new plan
    std::function<void()> launched;  // every LaunchMsg is sent
    // --mpi with the ranks observed: mpirun() is ready; start it while the agents stay (instead of
    // shut_down, after which mpirun runs alone).
    std::function<void()> start_mpirun;
  };
  // What the job holds, read as it is when each call comes (`links`, `output` and `sync` are made
  // later); all of it outlives this object.
  struct Job {
    const RankPlan& plan;
    std::vector<JobHost>& hosts;
    const std::unique_ptr<AgentLinks>& links;
    const std::unique_ptr<OutputMux>& output;
    const std::unique_ptr<SyncRun>& sync;
    const JobSecret& secret;
    const JobRestarts& restarts;
    Teardown& teardown;
    LaunchTimings& timings;
  };

  // Makes the probe round (with the probe cache unless --disable-cache).
  JobLaunch(boost::asio::io_context& io, const LaunchOptions& options, Job job, Hooks hooks);
  ~JobLaunch();
  JobLaunch(const JobLaunch&) = delete;
  JobLaunch& operator=(const JobLaunch&) = delete;

  // Every agent is up: the probes begin (Teardown::Phase::kProbing).
  void probe();
  void on_probe_result(std::size_t i, const ProbeResultMsg& m);
  // What hosts[i]'s ranks would run; ProtocolError out of turn. The launch goes on once every one is in.
  void on_fingerprint(std::size_t i, FingerprintMsg m);
  // hosts[i] holds every --sync file (or, under --check-only, has said which it lacks): SyncRun::Hooks.
  void on_synced(std::size_t i);
  void on_rendezvous_ready(std::size_t i, const HorovodRendezvousReadyMsg& m);
  void on_link_result(std::size_t i, const LinkTestResultMsg& m);
  // Horovod's client gives up after three refused tries, so its rendezvous must listen before any rank
  // starts: rank 0's agent starts it on its chosen NIC, and the launch waits for the port.
  void serve_horovod_rendezvous();
  // A restart's new plan: the last attempt's rendezvous is gone.
  void forget_rendezvous();

  // --mpi: the command line, once the NICs are chosen.
  const std::optional<std::vector<std::string>>& mpirun() const { return mpirun_; }
  // The job's end with `exit_code`: a failure drops its probe cache entry; returns `exit_code`.
  int ended(int exit_code);
  std::size_t probes_sent() const;

 private:
  using Phase = Teardown::Phase;

  bool fingerprints_in() const;
  bool ready_to_decide() const;
  bool check_fingerprints();
  void on_decided();
  // Measures the chosen NICs' links (LinkTestStep; Phase::kLinkTest), warns about degraded ones, then
  // runs `then`; at once without the test (--no-link-test, a single host).
  void measure_links(std::function<void()> then);
  void await_fingerprints();
  void prepare_mpirun();
  CheckReport nic_report() const;
  void report_check();
  void launch();
  std::optional<NicCache> probe_cache() const;
  std::vector<std::string> hosts_with_ranks() const;

  const LaunchOptions& options_;
  Job job_;
  Hooks hooks_;
  std::unique_ptr<NicDiscovery> nics_;
  LinkTestStep link_test_;
  std::optional<std::string> horovod_rendezvous_addr_;  // nothing when not served
  int horovod_rendezvous_port_ = 0;
  std::optional<std::vector<std::string>> mpirun_;
  bool nics_decided_ = false;  // on_decided ran; it runs again when it waited for fingerprints
  std::string agreed_;         // what every host's fingerprint agrees on, once compared without a difference
};

}  // namespace hvrun

#pragma once
// The link test as a step before a world's first rank (docs/DESIGN.md §5.6), one for the fixed job
// (JobLaunch) and the elastic job's first world (ElasticAdmission) alike: a LinkTestRun among the hosts
// that have a chosen NIC, then each line of link_warnings as a warning, then the caller's next step.
// A degraded link is warned about, never refused: the job may still be worth running.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/job/link_test_run.hpp"
#include "launcher/nic/nic_selector.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class LinkTestStep {
 public:
  struct Hooks {
    std::function<void(std::size_t, const LinkTestRequestMsg&)> send;  // to the agent of host i
    // The caller's deadline for the test: armed once, cancelled when the test ends.
    std::function<void(std::chrono::milliseconds, std::function<void()>)> arm_deadline;
    std::function<void()> cancel_deadline;
    // False once the job has begun to end: then nothing is warned about and the next step does not run.
    std::function<bool()> going_on;
  };

  explicit LinkTestStep(Hooks hooks);
  ~LinkTestStep();
  LinkTestStep(const LinkTestStep&) = delete;
  LinkTestStep& operator=(const LinkTestStep&) = delete;

  // Measures among `hosts` each one whose agent said hello and that has a chosen NIC (`nic_of`), the
  // others taking no part; once every pair has its figure, or at the deadline, warns and runs `then`.
  // With fewer than two such hosts there is nothing to measure: `then` runs at once. Called once.
  void start(const std::vector<JobHost>& hosts, const std::function<std::optional<NicChoice>(std::size_t)>& nic_of,
             std::function<void()> then);
  // A result from the agent of hosts[i] (`peer` in messages); dropped while no test runs.
  void add(std::size_t i, const LinkTestResultMsg& m, const std::string& peer);
  bool running() const { return run_ && run_->running(); }
  // The test once started (for --check-only's report: no figures when there was nothing to measure); null before.
  const LinkTestRun* run() const { return run_.get(); }

 private:
  Hooks hooks_;
  std::unique_ptr<LinkTestRun> run_;
};

}  // namespace hvrun

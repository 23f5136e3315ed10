#pragma once
// --max-restarts for the fixed job (Job, job.cpp), carried out: a rank's failure or a host's loss while
// the ranks run spends a restart (begin()): every rank stops, then relaunch() plans the next attempt on
// the hosts left and asks every agent left to prepare (RestartMsg); once all have answered
// (RestartReadyMsg), Hooks::agents_ready launches again. The decisions are RestartPlan's
// (restart_plan.hpp); the phases are Teardown's (kRestarting, kRelaunching); docs/DESIGN.md, "Restarts".
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/rank_plan.hpp"
#include "launcher/job/rank_exits.hpp"
#include "launcher/job/restart_plan.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class JobRestarts {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // The job's one deadline (its start, its stops, the agents' answers): armed anew, or cancelled.
    std::function<void(std::chrono::milliseconds, std::function<void()>)> arm_deadline;
    std::function<void()> cancel_deadline;
    std::function<void(const std::string&)> fail;  // the job cannot go on
    std::function<void()> shut_down;
    std::function<void()> replanned;     // the next attempt's plan is in: the old rendezvous is void
    std::function<void()> agents_ready;  // every agent left is prepared: launch the next attempt
    std::function<void(const std::string& why, int used, int max)> restarting;  // a restart begins
  };

  // `plan` (which relaunch() replaces), `hosts`, `links` (made later), `exits` and `teardown` are the
  // job's and outlive this object.
  JobRestarts(const LaunchOptions& options, RankPlan& plan, std::vector<JobHost>& hosts,
              const std::unique_ptr<AgentLinks>& links, const RankExits& exits, Teardown& teardown, Hooks hooks);

  bool enabled() const { return budget_.enabled(); }
  int used() const { return budget_.used(); }
  int max() const { return budget_.max(); }
  bool left() const { return budget_.used() < budget_.max(); }
  Clock::time_point since() const { return since_; }  // when the failure that began the restart came
  // TORCHELASTIC_RUN_ID: --rdzv-id, else this launcher's job; the same in every attempt.
  std::string run_id() const;

  // The job's hosts are known (none lost yet).
  void hosts_known();
  // hosts[i] is gone while ranks run or are being stopped for a restart. True when the job goes on
  // without it (a restart begins, or goes on); false when it cannot (the caller fails it).
  bool lose_host(std::size_t i, const std::string& why);
  // A rank failed or a host was lost while the ranks ran, and a restart is left: every rank stops.
  void begin(const std::string& why);
  // Every rank of the failed attempt has ended: the next attempt's plan, and the agents asked to prepare.
  void relaunch();
  void on_ready(std::size_t i, const RestartReadyMsg& m);

 private:
  using Phase = Teardown::Phase;

  std::vector<std::string> host_names() const;

  const LaunchOptions& options_;
  RankPlan& plan_;
  std::vector<JobHost>& hosts_;
  const std::unique_ptr<AgentLinks>& links_;
  const RankExits& exits_;
  Teardown& teardown_;
  Hooks hooks_;
  RestartPlan budget_;                  // the budget, and the next attempt's ranks
  std::vector<bool> gone_;              // hosts lost since the first launch, parallel to the plan's hosts
  std::vector<bool> awaited_;           // agents whose restart_ready is awaited, parallel to hosts
  Clock::time_point since_{};
};

}  // namespace hvrun

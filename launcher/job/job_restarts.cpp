#include "launcher/job/job_restarts.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "launcher/base/host_names.hpp"
#include "launcher/job/job_timeouts.hpp"
#include "launcher/job/rank_launch.hpp"

namespace hvrun {

JobRestarts::JobRestarts(const LaunchOptions& options, RankPlan& plan, std::vector<JobHost>& hosts,
                         const std::unique_ptr<AgentLinks>& links, const RankExits& exits, Teardown& teardown,
                         Hooks hooks)
    : options_(options),
      plan_(plan),
      hosts_(hosts),
      links_(links),
      exits_(exits),
      teardown_(teardown),
      hooks_(std::move(hooks)),
      budget_(options.max_restarts, plan.size(), options.min_np) {}

std::string JobRestarts::run_id() const { return job_run_id(options_); }

void JobRestarts::hosts_known() { gone_.assign(plan_.hosts().size(), false); }

bool JobRestarts::lose_host(std::size_t i, const std::string& why) {
  const Phase phase = teardown_.phase();
  if (phase != Phase::kRunning && phase != Phase::kRestarting) return false;
  if (phase == Phase::kRunning && budget_.used() == budget_.max()) return false;
  gone_[hosts_[i].plan_index] = true;
  const auto next = budget_.next(plan_, gone_, host_names());
  if (!next.plan) {
    hooks_.fail(why + "; no restart: " + next.why_not);
    if (exits_.all_exited()) hooks_.shut_down();
    return true;
  }
  if (phase == Phase::kRestarting) {
    spdlog::warn("{}; the restart goes on without it", why);
    if (exits_.all_exited()) relaunch();
  } else if (ranks_on(hosts_[i], plan_) == 0) {
    spdlog::warn("{}; it ran no rank, so the job goes on without it", why);
  } else {
    begin(why);
    if (exits_.all_exited()) relaunch();
  }
  return true;
}

std::vector<std::string> JobRestarts::host_names() const {
  std::vector<std::string> names(plan_.hosts().size());
  for (const JobHost& h : hosts_) names[h.plan_index] = h.name;
  return names;
}

void JobRestarts::begin(const std::string& why) {
  budget_.spend();
  teardown_.restart();
  since_ = Clock::now();
  spdlog::warn("{}: stopping all ranks to restart them (restart {} of {}, --max-restarts)", why, budget_.used(),
               budget_.max());
  if (hooks_.restarting) hooks_.restarting(why, budget_.used(), budget_.max());
  links_->send_all(TerminateMsg{static_cast<int>(options_.kill_grace.count()), {}});
  hooks_.arm_deadline(options_.kill_grace + kAfterKillSlack, [this] {
    std::vector<std::string> stuck;
    for (std::size_t i : exits_.hosts_running()) stuck.push_back(hosts_.at(i).name);
    hooks_.fail(std::to_string(exits_.running()) + " ranks on " + fold_names(stuck) + " did not end within " +
                seconds_text(options_.kill_grace + kAfterKillSlack) +
                " of SIGTERM and SIGKILL, so they cannot be restarted; check those hosts for processes stuck in the "
                "kernel (state D in ps)");
  });
}

void JobRestarts::relaunch() {
  hooks_.cancel_deadline();
  teardown_.advance(Phase::kRelaunching);
  auto next = budget_.next(plan_, gone_, host_names());
  if (!next.plan) return hooks_.fail("no restart: " + next.why_not);
  plan_ = std::move(*next.plan);
  hooks_.replanned();
  awaited_.assign(hosts_.size(), false);
  const std::size_t r0 = rank0_host(hosts_, plan_);
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    if (!links_->closed(i)) {
      awaited_[i] = true;
      links_->send(i, RestartMsg{budget_.used(), i == r0});
    }
  hooks_.arm_deadline(options_.start_timeout, [this] {
    std::vector<std::string> silent;
    for (std::size_t i = 0; i < hosts_.size(); ++i)
      if (awaited_[i]) silent.push_back(hosts_[i].name);
    hooks_.fail("no answer within " + seconds_text(options_.start_timeout) + " from " + fold_names(silent) +
                " to the restart; check those hosts");
  });
}

void JobRestarts::on_ready(std::size_t i, const RestartReadyMsg& m) {
  if (teardown_.tearing_down()) return;
  if (teardown_.phase() != Phase::kRelaunching || !awaited_.at(i))
    throw ProtocolError(links_->peer(i) + ": restart ready out of turn");
  awaited_[i] = false;
  // The attempt's MASTER_PORT and store, when rank 0 runs there.
  hosts_[i].master_port = m.free_port;
  hosts_[i].store_port = m.store_port;
  if (std::any_of(awaited_.begin(), awaited_.end(), [](bool b) { return b; })) return;
  hooks_.cancel_deadline();
  hooks_.agents_ready();
}

}  // namespace hvrun

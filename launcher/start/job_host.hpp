#pragma once
// One host of a job as the job knows it: where it is in the plan, how its agent was started, and
// what its agent said about itself. Shared by the job (job.cpp) and the pieces that read its hosts
// (connect_progress, check_run, rank_launch).
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/control_message.hpp"
#include "launcher/start/host_agent.hpp"
#include "launcher/start/local_agent.hpp"

namespace hvrun {

struct JobHost {
  std::size_t plan_index = 0;  // into RankPlan::hosts()
  std::string name;
  bool is_local = false;
  std::unique_ptr<LocalAgent> local;
  std::shared_ptr<HostAgent> remote;  // SSH, --rsh-agent
  std::optional<std::string> connect_error;  // why SSH or the agent start failed; nothing while it has not
  bool connecting = false;
  // When the host's login shell was asked to run the agent (Connector's OnShell); nothing before, and
  // for a start without that step.
  std::optional<std::chrono::steady_clock::time_point> shell_since;
  // Its login shell's time from the exec request to the agent's first bytes (HostAgent::shell_time), kept
  // here because the session itself is released as soon as the agent has ended (Job::Impl::on_agent_closed).
  std::optional<std::chrono::milliseconds> shell_time;
  std::optional<HelloMsg> hello;
  std::optional<ReadyMsg> ready;  // the agent has the job's secret and answers probes
  std::optional<FingerprintMsg> fingerprint;  // what its ranks would run (asked for when there is a command)
  // --sync: from the ready on, while its check or its copies are under way; the fingerprint is asked
  // for when they end. What it lacked: sync_files files, sync_bytes bytes.
  bool syncing = false;
  bool sync_checked = false;  // its agent said what it lacks
  std::size_t sync_files = 0;
  std::uint64_t sync_bytes = 0;
};

}  // namespace hvrun

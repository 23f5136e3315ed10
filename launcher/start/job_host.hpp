#pragma once
// One host of a job as the job knows it: where it is in the plan, where it is in its life (HostLife,
// the one state), how its agent was started, and what its agent said about itself (data only). Shared by
// both drivers (job.cpp, elastic_job.cpp) and the pieces that read their hosts (connect_progress,
// check_run, rank_launch).
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/control_message.hpp"
#include "launcher/start/host_agent.hpp"
#include "launcher/start/host_life.hpp"
#include "launcher/start/local_agent.hpp"

namespace hvrun {

struct JobHost {
  std::size_t plan_index = 0;  // into RankPlan::hosts()
  std::string name;
  bool is_local = false;
  std::unique_ptr<LocalAgent> local;
  std::shared_ptr<HostAgent> remote;  // SSH, --rsh-agent
  HostLife life;
  std::optional<std::string> connect_error;  // HostPhase::kStartFailed: why SSH or the agent start failed
  // When the host's login shell was asked to run the agent (Connector's OnShell); nothing before, and
  // for a start without that step.
  std::optional<std::chrono::steady_clock::time_point> shell_since;
  // Its login shell's time from the exec request to the agent's first bytes (HostAgent::shell_time), kept
  // here because the session itself is released as soon as the agent has ended (Job::Impl::on_agent_closed).
  std::optional<std::chrono::milliseconds> shell_time;
  std::optional<HelloMsg> hello;  // from HostPhase::kGreeted on
  // Where rank 0 there serves its MASTER_PORT and the store: from the hello and the ready, and from each
  // restart's restart_ready (--max-restarts).
  int master_port = 0;
  int store_port = 0;
  // --mpi observed (JobMsg::mpi_marker): its crash handler and stack directory, from the ready; mpirun
  // preloads them into that host's ranks.
  std::string rank_library;
  std::string rank_stack_dir;
  std::optional<FingerprintMsg> fingerprint;  // what its ranks would run (asked for when there is a command)
  // --sync: what it lacked, once its agent said (sync_files files, sync_bytes bytes); the copies run in
  // HostPhase::kSyncing, and the fingerprint is asked for when they end.
  bool sync_checked = false;
  std::size_t sync_files = 0;
  std::uint64_t sync_bytes = 0;
};

}  // namespace hvrun

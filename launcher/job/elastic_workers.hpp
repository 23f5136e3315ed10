#pragma once
// The workers an elastic job started (ElasticJob, elastic_job.cpp), each with its number on the wire
// (which also numbers its output, "[N]<stdout>:"), its host and local rank, and the slot each running
// one holds. It starts the workers of an assignment's slots that have none, and keeps track of their
// exits and of the hosts lost under them; what a worker's end means for the round is ElasticRounds'.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/job/elastic_slots.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/start/agent_links.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class ElasticAdmission;

class ElasticWorkers {
 public:
  // Worker numbers are handed out once each; a job that starts more workers than this in its life fails
  // rather than growing the output tables without bound.
  static constexpr int kMaxWorkers = 4096;

  // What a worker runs: the job's command, the ranks' environment policy and working directory (each
  // read when the first worker starts).
  struct Launch {
    const LaunchOptions& options;
    std::function<const EnvPolicy&()> env;
    std::function<const std::string&()> cwd;
  };

  ElasticWorkers(const std::vector<JobHost>& hosts, AgentLinks& links, OutputMux& output,
                 const ElasticAdmission& admission, Launch launch);

  // Workers for the slots of `assignment` (its first slot is the coordinator's) that have none, one
  // LaunchMsg per host; returns their ranks. nullopt when that would pass kMaxWorkers: the job must fail
  // (bound_text()); the hosts before have their workers then.
  std::optional<std::vector<int>> start(const std::vector<SlotInfo>& assignment);
  static std::string bound_text();

  // ProtocolError unless worker `id` runs on hosts[i].
  void check_rank_of(std::size_t i, int id) const;
  // Worker `id` on hosts[i] exited: its output is flushed and its slot freed; ProtocolError when it had
  // exited already. Returns its slot.
  SlotKey exited(std::size_t i, int id);
  // hosts[i] is lost: its running workers end with it (their output flushed). Returns their slots.
  std::vector<SlotKey> host_lost(std::size_t i);

  std::vector<int> on(std::size_t i) const;  // the numbers of the workers running on hosts[i]
  bool any_slot_held() const { return !running_.empty(); }
  bool none_running() const;
  std::optional<int> running_at(const SlotKey& slot) const;  // the worker holding `slot`
  std::size_t host_of(int id) const { return workers_[static_cast<std::size_t>(id)].host; }

 private:
  struct Worker {
    std::size_t host = 0;
    int local_rank = 0;
    bool running = true;
  };

  const std::vector<JobHost>& hosts_;
  AgentLinks& links_;
  OutputMux& output_;
  const ElasticAdmission& admission_;
  Launch launch_;
  std::vector<Worker> workers_;        // index: the worker's number on the wire
  std::map<SlotKey, int> running_;     // slot -> its running worker
};

}  // namespace hvrun

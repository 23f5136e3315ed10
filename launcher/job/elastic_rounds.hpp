#pragma once
// The rounds of an elastic job (ElasticJob, elastic_job.cpp), as Horovod 0.28.1's driver runs them
// (horovod/runner/elastic/driver.py): once enough slots are usable (ElasticAdmission), an assignment
// (a world) and its workers (ElasticWorkers); each worker's rank_and_size at the rendezvous, its exit and
// its host's loss recorded in the round (WorkerRegistry); at the round's end a reset (the failed
// workers' hosts blacklisted, a new world from the hosts left), the job's success, or its failure. The
// old world's workers are held while the new world's new ones start (forming: HeldWorkers); silent
// workers end their round early and are replaced (LateWorkers); the coordinator hears of host changes
// (HostChangeNotice).
// Each transition asks the driver's state machine (ElasticPhase) first. The job's end is the caller's,
// through Hooks.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/control_message.hpp"
#include "common/horovod_rendezvous.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/elastic/elastic_hosts.hpp"
#include "launcher/elastic/elastic_phase.hpp"
#include "launcher/elastic/worker_registry.hpp"
#include "launcher/job/elastic_admission.hpp"
#include "launcher/job/elastic_held_workers.hpp"
#include "launcher/job/elastic_host_notice.hpp"
#include "launcher/job/elastic_late_workers.hpp"
#include "launcher/job/elastic_slots.hpp"
#include "launcher/job/elastic_workers.hpp"
#include "launcher/start/agent_links.hpp"

namespace hvrun {

class ElasticRounds {
 public:
  struct Hooks {
    std::function<void(const std::string& why)> fail;  // the job cannot go on
    // A worker succeeded: the job ends; `failed` are the last exits of the workers recorded as failed in
    // the round, in record order.
    std::function<void(const std::vector<ExitedMsg>& failed)> succeeded;
    std::function<void()> started;  // the first world runs
    // A new world: its ranks and hosts, and what changed ("first", "host joined", "host lost", ...).
    std::function<void(int ranks, const std::vector<std::string>& hosts, const std::string& why)> world;
  };

  // Everything referenced is the job's and outlives this object.
  ElasticRounds(boost::asio::io_context& io, const LaunchOptions& options, ElasticPhase& phase,
                const ElasticHosts& pool, ElasticAdmission& admission, ElasticWorkers& workers, AgentLinks& links,
                Hooks hooks);

  // What the rendezvous asks of the rounds (HorovodRendezvousOptions).
  HorovodElasticHooks rendezvous_hooks();

  // The set of usable hosts may have changed (discovery, an admission, a refusal, a blacklisting).
  void host_set_changed(HorovodHostUpdate update);
  // --elastic-timeout for `what`, while too few slots are there; then the job fails.
  void wait_for_slots(const std::string& what);

  // driver.py _handle_worker_exit: only a worker whose slot is still assigned counts. `forming_now`: the
  // new world is forming (Action::kEndFormingRecord).
  void worker_ended(const SlotKey& key, const ExitedMsg& m, bool forming_now);
  // `host` was lost with the workers on `gone`, which count as failed.
  void workers_lost(const std::string& host, const std::vector<SlotKey>& gone, bool forming_now);
  // A loss or a join the workers are adjusting to, unless one is under way already.
  void note_change(const std::string& what);

  // kForming -> kOpen (no more held for new workers); nothing in another phase.
  void end_forming() { held_.end_forming(); }
  // The job stops: no more timers, and the held rank_and_size requests stay unanswered.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  using Phase = ElasticPhase::Phase;
  using Event = ElasticPhase::Event;
  using Action = ElasticPhase::Action;

  void maybe_start();
  void maybe_resume();
  void activate(const std::vector<HostSlots>& hs);
  void on_rank_published(int rank);
  void maybe_report_resumed();
  std::optional<SlotInfo> slot_of(const SlotKey& k) const;
  void on_rank_and_size(const std::string& host, int lr, std::function<void(std::string)> answer);
  void on_round_end(const RoundEnd& end);
  void notify_coordinator(HorovodHostUpdate update);
  void arm_late_timer();
  void early_round_end();
  void start_replacement(const SlotKey& key);

  const LaunchOptions& options_;
  const LaunchOptions::Elastic& el_;
  ElasticPhase& phase_;
  const ElasticHosts& pool_;
  ElasticAdmission& admission_;
  ElasticWorkers& workers_;
  Hooks hooks_;
  WorkerRegistry registry_;
  HostChangeNotice notice_;
  LateWorkers late_;
  HeldWorkers held_;                       // the old world's rank_and_size answers while the new one forms
  boost::asio::steady_timer slots_timer_;  // --elastic-timeout while too few slots are there
  std::vector<SlotInfo> assignment_;       // the current world; empty before the start
  std::map<SlotKey, ExitedMsg> last_exit_;
  std::optional<Clock::time_point> change_at_;  // a loss or a join being adjusted to
  std::string change_what_;
  bool links_asked_ = false;  // the first world's link test began (ElasticAdmission::measure_links)
};

}  // namespace hvrun

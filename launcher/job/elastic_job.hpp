#pragma once
// A Horovod elastic job (LaunchOptions::elastic): Horovod 0.28.1's elastic driver
// (horovod/runner/elastic/driver.py) with hvrun's agents. The hosts come from --host-discovery-script,
// run every second (or from -H, fixed); each new host gets an agent and has its NICs probed against
// the hosts already in before it is admitted; workers start with HOROVOD_ELASTIC=1 and re-initialise
// through the Gloo rendezvous, which the launcher serves (it outlives every host); the rounds follow
// WorkerRegistry's rules, hosts ElasticHosts', and the coordinator hears of host changes through
// WorkerNotifier. docs/DESIGN.md §6.9 has the state machine.
#include <memory>

#include "launcher/cli/launch_options.hpp"

namespace hvrun {

class ElasticJob {
 public:
  explicit ElasticJob(LaunchOptions options);  // options.elastic must be set
  ~ElasticJob();
  ElasticJob(const ElasticJob&) = delete;
  ElasticJob& operator=(const ElasticJob&) = delete;

  // Runs the job and returns hvrun's exit code: 0 when a worker succeeded and none of the last round
  // failed; that failure's code (128+N for signal N) otherwise; 1 when the job could not go on (no
  // slots within --elastic-timeout, every host blacklisted, --reset-limit, the discovery script's first
  // run failing); 130/143 after SIGINT/SIGTERM.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

#pragma once
// --host-discovery-script, run as horovodrun runs it (horovod/runner/elastic/discovery.py and driver.py):
// through /bin/sh, again one second after each run ends, its stdout parsed by parse_discovery_output.
// Unlike horovodrun, a run has a deadline (a script that hangs would stop discovery for good) and a
// failure says what the script printed on stderr. Whether a failure is fatal (the first run's) or a
// warning (a later one's) is the driver's decision.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/elastic/elastic_hosts.hpp"

namespace hvrun {

struct DiscoveryRun {
  std::vector<HostSlots> hosts;  // what the script printed (empty: no host is ready, not an error)
  std::string error;             // why the run gave no hosts; empty when it succeeded
  // Whether each host in `hosts` is this machine (find_local_hosts; DiscoveryLoop fills it, resolving
  // each name once, on its own thread, so that a slow name lookup never stalls the job's loop).
  std::map<std::string, bool> local;
};

// One run: `/bin/sh -c SCRIPT` in a process group of its own, stdin from /dev/null; stdout parsed,
// stderr's last lines kept for the message; the whole group killed at `timeout`.
DiscoveryRun run_discovery_script(const std::string& script, std::optional<int> slots_per_host,
                                  std::chrono::milliseconds timeout);

// Runs the script on a thread of its own until destroyed: a run, `on_run` with its result (on that
// thread), `period`, the next run. Destroying it kills a run in progress and joins the thread (a name
// lookup of new hosts in progress ends within its 5 s).
class DiscoveryLoop {
 public:
  DiscoveryLoop(std::string script, std::optional<int> slots_per_host, std::chrono::milliseconds period,
                std::chrono::milliseconds timeout, std::function<void(DiscoveryRun)> on_run);
  ~DiscoveryLoop();
  DiscoveryLoop(const DiscoveryLoop&) = delete;
  DiscoveryLoop& operator=(const DiscoveryLoop&) = delete;

 private:
  void loop();

  std::string script_;
  std::optional<int> slots_;
  std::chrono::milliseconds period_, timeout_;
  std::function<void(DiscoveryRun)> on_run_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  pid_t running_ = -1;  // the process group of the run in progress
  std::map<std::string, bool> local_;  // the loop thread's: DiscoveryRun::local of each name met
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace hvrun

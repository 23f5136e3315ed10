#pragma once
// Tells a Horovod elastic job's coordinator that its hosts changed, the way Horovod 0.28.1's driver does
// (horovod/runner/elastic/driver.py, _notify_workers_host_changes): over the worker notification service
// the coordinator published under worker_addresses, with Horovod's own sealed pickles
// (common/horovod_pickle.hpp). The coordinator's horovod.elastic.run then resets at its next
// state.commit() or check_host_updates().
//
// Every address the worker published is pinged at once (a PingRequest, answered by a PingResponse that
// names the worker notification service); the update goes to the first that answered, then to the next
// if that one fails. One deadline covers it all, so a NIC that drops packets costs the deadline once.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/horovod_pickle.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

struct WorkerNotice {
  bool acked = false;          // the service answered the update with AckResponse
  std::string address;         // "IP:PORT" that took it (acked only)
  std::string source_address;  // the address the worker saw hvrun's connection come from (acked only)
  // Why not, address by address ("10.0.0.5:40123 refused (Connection refused); ..."); empty when acked.
  std::string detail;
};

class WorkerNotifier {
 public:
  using Done = std::function<void(WorkerNotice)>;
  explicit WorkerNotifier(boost::asio::io_context& io);
  ~WorkerNotifier();
  WorkerNotifier(const WorkerNotifier&) = delete;
  WorkerNotifier& operator=(const WorkerNotifier&) = delete;

  // Sends HostsUpdatedRequest(timestamp, res) to `worker`; `done` runs once, on the io_context's thread,
  // within `timeout`. Operations in flight keep what they need alive past the notifier.
  void notify(const HorovodWorkerAddresses& worker, long long timestamp, HorovodHostUpdate res,
              std::chrono::milliseconds timeout, Done done);

 private:
  boost::asio::io_context& io_;
};

}  // namespace hvrun

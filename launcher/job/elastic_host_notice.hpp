#pragma once
// horovodrun's _notify_workers_host_changes for an elastic job (ElasticRounds): the coordinator (rank 0)
// hears of a host change at the notification address its worker published at the rendezvous, and its
// state.commit() or check_host_updates() makes every worker reset. A coordinator told while it
// re-initialises loses the notice (Horovod's State.on_reset() empties its queue of host updates after
// hvd.init()), so the caller is asked again kRenotifyPeriod after each notice whether to repeat it.
#include <functional>
#include <map>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/horovod_rendezvous.hpp"
#include "launcher/elastic/worker_notifier.hpp"
#include "launcher/job/elastic_slots.hpp"

namespace hvrun {

class HostChangeNotice {
 public:
  explicit HostChangeNotice(boost::asio::io_context& io);

  // The rendezvous' HorovodElasticHooks::worker_addresses: where the worker on `slot` listens.
  void address(const SlotKey& slot, HorovodWorkerAddresses a) { addresses_[slot] = std::move(a); }
  // Tells the worker on `coordinator` of `update` and returns true; `again` runs kRenotifyPeriod later
  // unless cancel() or another tell() comes first. False, and nothing sent, when that worker has
  // published no address yet.
  bool tell(const SlotKey& coordinator, HorovodHostUpdate update, std::function<void()> again);
  void cancel();

 private:
  WorkerNotifier notifier_;
  boost::asio::steady_timer renotify_timer_;  // kRenotifyPeriod after each notice to the coordinator
  std::map<SlotKey, HorovodWorkerAddresses> addresses_;
};

}  // namespace hvrun

#pragma once
// The fixed job's teardown carried out (Job, job.cpp): Teardown (teardown.hpp) decides, this class
// acts. It prints the failure's report when it is the first, stops the ranks (TerminateMsg, then the
// kill grace), shuts the agents down (ShutdownMsg, then kShutdownTimeout), and stops the event loop once
// every link is closed and everything the ranks printed is written. It owns the job's one deadline,
// which every phase arms anew (the start, the probes, the rendezvous, the stops).
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/job/hang_autopsy.hpp"
#include "launcher/job/sync_run.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/output/output_mux.hpp"
#include "launcher/start/agent_links.hpp"

namespace hvrun {

class JobEnd {
 public:
  struct Hooks {
    std::function<void(std::chrono::milliseconds grace)> start_autopsy;  // the stacks, then the ranks stop
    std::function<void()> clear_status;  // before the report, so it does not land inside the status line
    std::function<void()> stop_status;   // no more redraws
  };
  // What the job holds (`links`, `output` and `sync` are made later); all of it outlives this object.
  struct Job {
    Teardown& teardown;
    const std::unique_ptr<AgentLinks>& links;
    const std::unique_ptr<OutputMux>& output;
    const std::unique_ptr<SyncRun>& sync;
    HangAutopsy& autopsy;
    boost::asio::steady_timer& stall_timer;
  };

  JobEnd(boost::asio::io_context& io, Job job, Hooks hooks);

  // The deadline: `on_expiry` runs `after` from now, unless it is armed again or cancelled first.
  void arm_deadline(std::chrono::milliseconds after, std::function<void()> on_expiry);
  void cancel_deadline() { deadline_.cancel(); }

  // Teardown's decision `d`; `line`: the failure's report, printed when it is the first.
  void carry_out(const Teardown::Decision& d, const std::string& line);
  void stop_ranks(std::chrono::milliseconds grace);
  void shut_down();
  void maybe_done();  // every link is closed: finish()
  void finish();

 private:
  boost::asio::io_context& io_;
  Job job_;
  Hooks hooks_;
  boost::asio::steady_timer deadline_;
};

}  // namespace hvrun

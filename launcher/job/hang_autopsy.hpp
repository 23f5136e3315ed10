#pragma once
// The hang autopsy (docs/DESIGN.md 6.7) for either driver, the fixed job and the Horovod elastic one:
// every live agent with ranks is asked for its ranks' stacks (StacksRequestMsg), and once each has
// answered (or gone), or kAutopsyTimeout has passed, the stacks are worded grouped by place
// (stack_groups_report) with the hosts that stayed silent named; the driver then prints that and stops
// the ranks. The driver decides when one starts (a first signal, --stall-timeout) and carries its end out.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/control_message.hpp"
#include "launcher/job/stack_groups.hpp"

namespace hvrun {

class HangAutopsy {
 public:
  struct Hooks {
    // Asks host i's agent for its ranks' stacks.
    std::function<void(std::size_t)> ask;
    // It is over: `report` (lines with hvrun's prefix) is to be printed, then the ranks stopped with `grace`.
    std::function<void(const std::string& report, std::chrono::milliseconds grace)> ended;
  };

  HangAutopsy(boost::asio::io_context& io, Hooks hooks);

  bool active() const { return state_.has_value(); }
  // Asks every host i whose `silent[i]` is not empty (it runs ranks and its agent is there; the text
  // names it and its ranks should it stay silent: "lab1 (ranks 2,3)"). `names[i]`: host i, for the
  // stacks; `running`: the ranks not yet exited. Ends at once when no host is asked.
  void start(std::vector<std::string> names, std::vector<std::string> silent, int running,
             std::chrono::milliseconds grace);
  // Host i's answer; `check_rank` throws ProtocolError for a rank that is not on it. One that comes late
  // or unasked is dropped.
  void stacks(std::size_t i, StacksMsg m, const std::function<void(int)>& check_rank);
  // Host i's agent is gone: it is not waited for.
  void host_gone(std::size_t i);
  // Dropped without a report (a second signal stops the ranks at once).
  void cancel();

 private:
  struct State {
    std::vector<std::string> names, silent;
    std::vector<bool> awaited;
    std::vector<RankStackText> stacks;
    std::chrono::milliseconds grace{0};
    int running = 0;
  };
  void maybe_end();
  void end();

  boost::asio::steady_timer timer_;
  Hooks hooks_;
  std::optional<State> state_;
};

}  // namespace hvrun

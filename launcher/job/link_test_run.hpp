#pragma once
// The link test of a job (docs/DESIGN.md §5.6) driven over the agents' channels: once the NICs are
// chosen and before the first rank starts, each host of the ring (link_ring, over the hosts with a
// chosen NIC, in -H order) is asked to measure its chosen NIC towards its next host's chosen address;
// all at once, each pair bounded by kBytes or kWindow and kPairTimeout. The figures are judged and
// warned about (link_warnings) when every host has answered, or at the deadline, which names the pairs
// that gave no figure; then `done` runs, once.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/nic/link_speed.hpp"

namespace hvrun {

class LinkTestRun {
 public:
  static constexpr int kBytes = 4 << 20;
  static constexpr std::chrono::milliseconds kWindow{250};
  static constexpr std::chrono::milliseconds kPairTimeout{2000};
  static constexpr std::chrono::milliseconds kSlack{1000};  // for agents slow to say so

  struct Hooks {
    std::function<void(std::size_t, const LinkTestRequestMsg&)> send;  // to the agent of host i
    // The job's single deadline: armed for the test, cancelled by the caller in `done`.
    std::function<void(std::chrono::milliseconds, std::function<void()>)> arm_deadline;
    std::function<void()> done;
  };

  // `hosts`: each host as the test names it; `ports`: each host's probe port; a host without a chosen
  // NIC (nullopt) takes no part.
  LinkTestRun(std::vector<std::optional<LinkHost>> hosts, std::vector<int> ports, Hooks hooks);

  // Sends the requests; false when there is no pair to measure (then `done` is not called).
  bool start();
  // A result from the agent of host `from` (`peer` in messages); ProtocolError for a pair it was not asked.
  void add(std::size_t from, const LinkTestResultMsg& m, const std::string& peer);
  bool running() const { return running_; }

  // Every pair asked, in ring order: its figure, or "no answer from the agent" when none came.
  const std::vector<LinkFigure>& figures() const { return figures_; }
  // The hosts as link_warnings names them (a host without a chosen NIC: its name alone).
  std::vector<LinkHost> hosts() const;

 private:
  void end();

  std::vector<std::optional<LinkHost>> hosts_;
  std::vector<int> ports_;
  Hooks hooks_;
  std::vector<LinkFigure> figures_;
  std::vector<bool> answered_;
  std::size_t pending_ = 0;
  bool running_ = false;
};

}  // namespace hvrun

#include "launcher/job/link_test_step.hpp"

#include <spdlog/spdlog.h>

namespace hvrun {

LinkTestStep::LinkTestStep(Hooks hooks) : hooks_(std::move(hooks)) {}
LinkTestStep::~LinkTestStep() = default;

void LinkTestStep::start(const std::vector<JobHost>& hosts,
                         const std::function<std::optional<NicChoice>(std::size_t)>& nic_of,
                         std::function<void()> then) {
  std::vector<std::optional<LinkHost>> members;
  std::vector<int> ports;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const auto c = hosts[i].hello ? nic_of(i) : std::nullopt;
    members.push_back(c ? std::optional<LinkHost>(LinkHost{hosts[i].name, c->iface, c->address}) : std::nullopt);
    ports.push_back(hosts[i].hello ? hosts[i].hello->probe_port : 0);
  }
  run_ = std::make_unique<LinkTestRun>(
      std::move(members), std::move(ports),
      LinkTestRun::Hooks{.send = hooks_.send,
                         .arm_deadline = hooks_.arm_deadline,
                         .done = [this, then] {
                           hooks_.cancel_deadline();
                           if (!hooks_.going_on()) return;
                           for (const std::string& line : link_warnings(run_->figures(), run_->hosts()))
                             spdlog::warn("{}", line);
                           then();
                         }});
  if (!run_->start()) then();
}

void LinkTestStep::add(std::size_t i, const LinkTestResultMsg& m, const std::string& peer) {
  if (running()) run_->add(i, m, peer);
}

}  // namespace hvrun

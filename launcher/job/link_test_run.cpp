#include "launcher/job/link_test_run.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

namespace hvrun {

LinkTestRun::LinkTestRun(std::vector<std::optional<LinkHost>> hosts, std::vector<int> ports, Hooks hooks)
    : hosts_(std::move(hosts)), ports_(std::move(ports)), hooks_(std::move(hooks)) {}

std::vector<LinkHost> LinkTestRun::hosts() const {
  std::vector<LinkHost> out;
  for (const auto& h : hosts_) out.push_back(h.value_or(LinkHost{}));
  return out;
}

bool LinkTestRun::start() {
  std::vector<std::size_t> members;
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    if (hosts_[i]) members.push_back(i);
  std::vector<LinkTestRequestMsg> requests(hosts_.size());
  for (const auto& [a, b] : link_ring(members.size())) {
    const std::size_t from = members[a];
    const std::size_t to = members[b];
    figures_.push_back(LinkFigure{from, to, 0, 0, "no answer from the agent on " + hosts_[from]->name});
    requests[from].targets.push_back(ProbeAddress{static_cast<int>(to), hosts_[to]->iface, hosts_[to]->address, ports_[to]});
  }
  if (figures_.empty()) return false;
  answered_.assign(figures_.size(), false);
  pending_ = figures_.size();
  running_ = true;
  log_of(LogSubsys::kNic).info("measuring {} links, each host to the next (4 MiB or 250 ms each)", figures_.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].targets.empty()) continue;
    requests[i].max_bytes = kBytes;
    requests[i].max_ms = static_cast<int>(kWindow.count());
    requests[i].timeout_ms = static_cast<int>(kPairTimeout.count());
    hooks_.send(i, requests[i]);
  }
  hooks_.arm_deadline(kPairTimeout + kSlack, [this] {
    if (running_) end();
  });
  return true;
}

void LinkTestRun::add(std::size_t from, const LinkTestResultMsg& m, const std::string& peer) {
  for (std::size_t k = 0; k < figures_.size(); ++k) {
    LinkFigure& f = figures_[k];
    if (f.from != from || static_cast<int>(f.to) != m.host) continue;
    if (answered_[k]) break;
    if (m.bytes < 0 || m.micros < 0) throw ProtocolError(peer + ": link test result with a negative figure");
    answered_[k] = true;
    f.bytes = m.bytes;
    f.micros = m.micros;
    f.error = m.error.empty() && m.micros == 0 ? "no time measured" : m.error;
    if (--pending_ == 0 && running_) end();
    return;
  }
  throw ProtocolError(peer + ": link test result for host " + std::to_string(m.host) + ", which it was not asked to measure");
}

void LinkTestRun::end() {
  running_ = false;
  for (const LinkFigure& f : figures_)
    if (f.measured())
      log_of(LogSubsys::kNic).info("link {} -> {}: {} ({} bytes in {} us)", hosts_[f.from]->name, hosts_[f.to]->name,
                                   rate_text(f.mb_per_s()), f.bytes, f.micros);
  hooks_.done();
}

}  // namespace hvrun

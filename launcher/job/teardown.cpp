#include "launcher/job/teardown.hpp"

#include "launcher/base/exit_codes.hpp"

namespace hvrun {

bool Teardown::before_launch() const {
  return phase_ == Phase::kStarting || phase_ == Phase::kProbing || phase_ == Phase::kLinkTest ||
         phase_ == Phase::kRendezvous ||
         phase_ == Phase::kRelaunching;
}

bool Teardown::restart() {
  if (phase_ != Phase::kRunning) return false;
  phase_ = Phase::kRestarting;
  return true;
}

std::string Teardown::activity() const {
  switch (phase_) {
    case Phase::kStarting: return "starting the agents";
    case Phase::kProbing: return "probing the NICs";
    case Phase::kLinkTest: return "measuring the links";
    case Phase::kRendezvous: return "starting Horovod's rendezvous";
    case Phase::kRunning: return "supervising the ranks";
    case Phase::kAutopsy: return "collecting the ranks' stacks";
    case Phase::kRestarting: return "stopping the ranks to restart them";
    case Phase::kRelaunching: return "preparing the hosts for a restart";
    case Phase::kStopping: return "stopping the ranks";
    case Phase::kShuttingDown:
    case Phase::kDone: return "shutting down the agents";
  }
  return "running the job";
}

void Teardown::record_failure(int exit_code) {
  failure_reported_ = true;
  exit_code_ = exit_code;
}

Teardown::Decision Teardown::fail() {
  if (tearing_down()) return {};
  Decision d;
  if (!failure_reported_) {
    d.report = true;
    record_failure(kExitLaunchFailed);
  }
  d.action = before_launch() ? Action::kShutDown : Action::kStopRanks;
  d.grace = kill_grace_;
  return d;
}

Teardown::Decision Teardown::on_signal(int sig) {
  if (phase_ == Phase::kDone) return {false, Action::kDropOutput, {}};
  ++interrupts_;
  Decision d;
  if (!failure_reported_) {
    d.report = true;
    record_failure(128 + sig);
  }
  if (before_launch()) {
    d.action = Action::kShutDown;
  } else if (phase_ == Phase::kRunning && interrupts_ == 1) {
    d.action = Action::kAutopsy;
    d.grace = kill_grace_;
  } else {
    d.action = Action::kStopRanks;
    d.grace = interrupts_ > 1 ? std::chrono::milliseconds(0) : kill_grace_;  // a second Ctrl-C: no more grace
  }
  return d;
}

Teardown::Decision Teardown::on_stall() {
  if (phase_ != Phase::kRunning) return {};
  Decision d;
  if (!failure_reported_) {
    d.report = true;
    record_failure(kExitLaunchFailed);
  }
  d.action = Action::kAutopsy;
  d.grace = kill_grace_;
  return d;
}

bool Teardown::begin_autopsy() {
  if (phase_ != Phase::kRunning) return false;
  phase_ = Phase::kAutopsy;
  return true;
}

bool Teardown::stop_ranks() {
  if (tearing_down()) return false;
  phase_ = Phase::kStopping;
  return true;
}

bool Teardown::shut_down() {
  if (tearing_down()) return false;
  phase_ = Phase::kShuttingDown;
  return true;
}

}  // namespace hvrun

#pragma once
// Issue 40: the agents' observations (ObservationMsg, one per host per window) gathered into the job's
// windows for StragglerWatch. A window is judged once every host has sent its part of it, or two windows
// after the last judgement with the parts that came: a host silent then (its ranks ended, or it runs
// none) is no longer waited for until it reports again. Pure; fed by JobCore (launcher/job/job_core.hpp).
#include <chrono>
#include <cstddef>
#include <string>
#include <functional>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/job/straggler_watch.hpp"

namespace hvrun {

class StragglerBoard {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StragglerBoard(std::size_t hosts, StragglerWatch::Settings settings = {});

  // Host `host` (named `name`) sent `m` at `now`: the lines the window it completes brings, if any.
  // `host_of` names the job host that has an address ("" for none).
  std::vector<StragglerWatch::Event> report(std::size_t host, const std::string& name, const ObservationMsg& m,
                                            Clock::time_point now,
                                            const std::function<std::string(const std::string&)>& host_of = {});

 private:
  struct Part {
    std::vector<RankShares> ranks;
    bool fresh = false;   // arrived since the last judgement
    bool silent = false;  // sent nothing for two windows: not waited for
  };
  StragglerWatch::Settings settings_;
  StragglerWatch watch_;
  std::vector<Part> parts_;  // by host
  Clock::time_point judged_{};
};

}  // namespace hvrun

#pragma once
// One launch, end to end: plan the ranks, start an agent per host, start the ranks, stream their
// output, supervise them, tear everything down, and come back with the job's exit code.
#include <memory>

#include "launcher/base/exit_codes.hpp"
#include "launcher/cli/launch_options.hpp"

namespace hvrun {

class Job {
 public:
  explicit Job(LaunchOptions options);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the job (or the dry run) and returns hvrun's exit code: 0 when every rank exited 0; the
  // first failing rank's code (128+N for signal N); 130/143 after SIGINT/SIGTERM; 127 when the
  // command cannot be executed; 1 when hvrun could not start the job. Throws UsageError for plans
  // that cannot work.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun

#pragma once
// What the start-up says about the hosts while agents start: the status line's counts, the hosts that
// could not be reached, and those whose agent never came.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/start/job_host.hpp"
#include "launcher/start/start_progress.hpp"

namespace hvrun {

// The status line's counts and pending hosts, `elapsed` after the start.
StartProgress start_progress(const std::vector<JobHost>& hosts, std::chrono::milliseconds elapsed);
// "cannot start the job on 2 of 5 hosts:" and each failed host's reason on its own line; nothing when
// every host connected. All hosts are tried before anything is reported, so it names every one.
std::optional<std::string> connect_failures(const std::vector<JobHost>& hosts);
// Why the agent of `host` was lost: `error` ("it exited" when empty) and, for a remote agent that wrote
// to stderr, "; its last words: " and the last line it wrote.
std::string agent_loss_reason(const JobHost& host, const std::string& error);
// "lab3, lab7": the hosts whose agent neither said hello nor failed to start.
std::string agents_missing(const std::vector<JobHost>& hosts);

}  // namespace hvrun

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

// The status line's counts and pending hosts, `elapsed` after the start and at `now`.
StartProgress start_progress(const std::vector<JobHost>& hosts, std::chrono::milliseconds elapsed,
                             std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

// What the start deadline (--start-timeout from the last host's turn) finds at `now`. A host whose agent
// has not said hello is stuck, unless its login shell is running (JobHost::shell_since) and has run for
// less than shell_timeout_of(start_timeout). `give_up`: the job's failure naming every stuck host
// (those in their shell with shell_stuck_text); else the job waits `recheck` more (the soonest a shell
// runs out; zero when no host is pending).
struct StartCheck {
  std::optional<std::string> give_up;
  std::chrono::milliseconds recheck{0};
};
StartCheck check_start(const std::vector<JobHost>& hosts, std::chrono::steady_clock::time_point now,
                       std::chrono::milliseconds start_timeout);

// For --verbose: "login shells (exec request to the agent's first bytes): median 0.41 s, slowest lab5
// 8.10 s" over the hosts whose agent says how long its shell ran; nothing when none does.
std::optional<std::string> shell_times_text(const std::vector<JobHost>& hosts);
// "cannot start the job on 2 of 5 hosts:" and each failed host's reason on its own line; nothing when
// every host connected. All hosts are tried before anything is reported, so it names every one.
std::optional<std::string> connect_failures(const std::vector<JobHost>& hosts);
// Why the agent of `host` was lost: `error` ("it exited" when empty) and, for a remote agent that wrote
// to stderr, "; its last words: " and the last line it wrote.
std::string agent_loss_reason(const JobHost& host, const std::string& error);
// "lab3, lab7": the hosts whose agent neither said hello nor failed to start.
std::string agents_missing(const std::vector<JobHost>& hosts);

}  // namespace hvrun

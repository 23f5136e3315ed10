#pragma once
// Internal to the SSH layer: SshSession::run, one short command on its own channel with no stdin.
#include <chrono>
#include <cstdint>
#include <string>

#include "launcher/ssh/ssh_core.hpp"

namespace hvrun::ssh_detail {

// Collects stdout and stderr (at most SshSession::kRunCaptureLimit each) and the exit status. Throws
// kCommandTimeout when the command has not ended within `timeout`, kChannel or kConnectionLost.
RunResult run_command(Core& core, const std::string& command, std::chrono::milliseconds timeout);

}  // namespace hvrun::ssh_detail

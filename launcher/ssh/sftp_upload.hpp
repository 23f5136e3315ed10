#pragma once
// Internal to the SSH layer: SshSession::upload and upload_files, files copied over one SFTP session
// with the checks that make a half-written or wrong copy impossible to run (see SshSession::upload_files
// for the contract).
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launcher/ssh/ssh_core.hpp"
#include "launcher/ssh/ssh_session.hpp"

namespace hvrun::ssh_detail {

// Blocking, holding the session lock throughout; bounded by `timeout` through a watchdog thread that
// shuts the socket down (libssh's SFTP calls retry reads forever). After a timeout the session is
// marked lost.
void upload_files(Core& core, const std::vector<FileCopy>& files, std::uint32_t directory_mode,
                  std::chrono::milliseconds timeout, const std::function<void(std::uint64_t)>& copied);

}  // namespace hvrun::ssh_detail

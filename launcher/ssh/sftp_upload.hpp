#pragma once
// Internal to the SSH layer: SshSession::upload, a file copied over SFTP with the checks that make a
// half-written or wrong copy impossible to run (see SshSession::upload for the contract).
#include <chrono>
#include <cstdint>
#include <string>

#include "launcher/ssh/ssh_core.hpp"

namespace hvrun::ssh_detail {

// Blocking, holding the session lock throughout; bounded by `timeout` through a watchdog thread that
// shuts the socket down (libssh's SFTP calls retry reads forever). After a timeout the session is
// marked lost.
void upload_file(Core& core, const std::string& local_path, const std::string& remote_path, std::uint32_t mode,
                 std::chrono::milliseconds timeout);

}  // namespace hvrun::ssh_detail

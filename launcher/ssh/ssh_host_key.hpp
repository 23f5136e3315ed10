#pragma once
// Internal to the SSH layer: the host-key policy of SshSession::connect, as OpenSSH's
// StrictHostKeyChecking=accept-new (or =yes with SshTarget::strict_host_key), against core.known_hosts.
#include <string>

#include "launcher/ssh/ssh_core.hpp"

namespace hvrun::ssh_detail {

// Accepts a known key; refuses a changed one (kHostKeyChanged, with the ssh-keygen -R line that fixes it);
// records an unknown one, or refuses it when `strict` (kHostKeyUnknown, with the ssh-keyscan line).
// `alias`: the config's HostKeyAlias; known_hosts is then checked under that name alone, no port.
void verify_host_key(Core& core, bool strict, const std::string& alias);

}  // namespace hvrun::ssh_detail

#pragma once
// Internal to the SSH layer: the host-key check of SshSession::connect, by the host's HostKeyPolicy
// (host_key_policy.hpp: StrictHostKeyChecking and the known-hosts files, as the ssh config gives them).
#include <string>

#include "launcher/ssh/host_key_policy.hpp"
#include "launcher/ssh/ssh_core.hpp"

namespace hvrun::ssh_detail {

// Checks the server's key against every known-hosts file of `policy` (libssh's check, one file at a
// time). A key one file holds is accepted. A changed key (a file holds another for this host) is refused
// (kHostKeyChanged, with the ssh-keygen -R line that fixes it) unless the policy is kNo (then a warning).
// An unknown key is refused under kYes (kHostKeyUnknown, with the ssh-keyscan line), else recorded in the
// first user file. Every refusal names the host, the key's type and fingerprint, the files consulted and
// what set the policy. `alias`: the config's HostKeyAlias; the files are then checked under that name
// alone, no port.
void verify_host_key(Core& core, const HostKeyPolicy& policy, const std::string& alias);

}  // namespace hvrun::ssh_detail

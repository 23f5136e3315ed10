#pragma once
// Internal to the SSH layer: authentication in SshSession::connect. hvrun never prompts: publickey only
// (ssh-agent first, then -i, the config's IdentityFile, the default identities).
#include <string>

#include "launcher/ssh/ssh_core.hpp"

namespace hvrun::ssh_detail {

// Throws kAuthDenied with the fix (ssh-copy-id, -i) when no key is accepted or the server wants more than
// a key; kHandshake when libssh fails otherwise.
void authenticate(Core& core);

}  // namespace hvrun::ssh_detail

#pragma once
// Internal to the SSH layer: the first step of SshSession::connect. Applies the user's OpenSSH set-up
// for the host as written (`ssh -G`, see openssh_config.hpp; -p, -i, the timeouts) to a Core's libssh
// session and opens the SSH transport: name lookup and TCP connect under one deadline (tcp_dial.hpp),
// or the ProxyCommand/ProxyJump, then the handshake. Every failure is one classified SshError line
// (or a UsageError for a host string that cannot be a host).
#include <string>

#include "launcher/ssh/host_key_policy.hpp"
#include "launcher/ssh/ssh_core.hpp"

namespace hvrun::ssh_detail {

// What connect() goes on with once the transport is up.
struct DialedSession {
  std::string address;         // what was reached, for messages: "10.0.0.5", "h1 (via ProxyJump j)"
  std::string host_key_alias;  // the config's HostKeyAlias, or empty
  HostKeyPolicy host_key_policy;  // the target's (its hops' went to their ssh)
};

// Fills core.hostname, port, user and known_hosts. The core must not be shared yet (no lock taken).
DialedSession dial_session(Core& core, const SshTarget& target);

}  // namespace hvrun::ssh_detail

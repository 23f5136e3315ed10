#pragma once
// Which host keys hvrun accepts from a host, as OpenSSH would for the user's config (`ssh -G`,
// openssh_config.hpp): StrictHostKeyChecking and the known-hosts files, for the host hvrun connects to
// and for every hop of its ProxyJump (whose `ssh` is given the same policy as options).
//
// Precedence: --ssh-strict-host-key-checking (SshTarget::strict_host_key) refuses unknown hosts whatever
// the config says; else the config's StrictHostKeyChecking (yes; ask, taken as yes since hvrun never
// prompts; accept-new; no/off); else hvrun's default, accept-new (an unknown key is recorded, a changed
// one refused). Known-hosts files: the config's UserKnownHostsFile (every file; `none`: no user file),
// else <ssh dir>/known_hosts (hvrun's ssh dir honours $HOME); then GlobalKnownHostsFile's files.
#include <string>
#include <vector>

#include "launcher/ssh/openssh_config.hpp"

namespace hvrun {

enum class HostKeyChecking {
  kYes,        // an unknown or changed key is refused
  kAcceptNew,  // an unknown key is recorded in the first user file; a changed one refused
  kNo,         // an unknown key is recorded; a changed one is accepted with a warning (as OpenSSH's no)
};

struct HostKeyPolicy {
  HostKeyChecking checking = HostKeyChecking::kAcceptNew;
  std::string source;                     // what set `checking`, for messages
  std::vector<std::string> user_files;    // checked first; a recorded key goes to the first; empty: none
  std::vector<std::string> global_files;  // checked after them, never written

  std::vector<std::string> files() const;  // user_files then global_files
  std::string files_text() const;          // "A, B and C", or "no file (UserKnownHostsFile none ...)"
};

// The policy for a host whose `ssh -G` answer is `config`. `strict_flag`: --ssh-strict-host-key-checking
// was given. `ssh_dir`: hvrun's ssh directory ($HOME/.ssh), home of the default user file. Throws
// UsageError naming `host` for a StrictHostKeyChecking value OpenSSH does not print.
HostKeyPolicy host_key_policy(const std::string& host, const OpenSshHostConfig& config, bool strict_flag,
                              const std::string& ssh_dir);

// The `-o` options that give an OpenSSH client (a ProxyJump hop's) this policy, quoted for /bin/sh.
std::string openssh_options(const HostKeyPolicy& policy);

}  // namespace hvrun

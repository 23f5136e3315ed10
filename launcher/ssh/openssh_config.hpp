#pragma once
// What OpenSSH's client would use to reach one host, asked of OpenSSH itself (`ssh -G`).
//
// Why not libssh's own config parser: libssh 0.10 refuses any host it is given that is not a DNS-shaped
// name (`gpu_node1` fails before the config is read), matches `Host` patterns case-insensitively where
// OpenSSH does not, ignores `Match originalhost`, and turns ProxyJump into a command only for hop names
// it accepts. An ~/.ssh/config alias is a config name, not a DNS name: whatever `ssh HOST` accepts, hvrun
// accepts, so the matching (Host, Match, Include, %-tokens, lower-casing) is OpenSSH's own, and hvrun
// applies the result to libssh.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hvrun {

struct OpenSshHostConfig {
  std::string hostname;                     // what to dial (HostName, or the host as written, as OpenSSH has it)
  int port = 22;
  std::string user;
  std::vector<std::string> identity_files;  // IdentityFile lines of the config; empty when OpenSSH's defaults
  std::string known_hosts_file;             // the first UserKnownHostsFile; empty when OpenSSH's default
  std::string proxy_command;                // empty when none
  std::string proxy_jump;                   // comma-separated [user@]host[:port] hops; empty when none
  std::string host_key_alias;               // HostKeyAlias: the name known_hosts is checked under; empty: none
};

// Reads `ssh -G` output (one "keyword value" per line). `home` is the passwd home directory, against
// which OpenSSH's defaults (~/.ssh/id_*, HOME/.ssh/known_hosts) are recognised and left out.
// Throws Error if a line hvrun needs (hostname, port, user) is missing or malformed.
OpenSshHostConfig parse_openssh_dump(const std::string& text, const std::string& home);

// Runs `ssh -T -G [-F config_file] -- host`, at most `timeout`. An empty `config_file` lets OpenSSH read
// its own files (~/.ssh/config of the passwd home, then /etc/ssh/ssh_config). Throws UsageError naming
// `host` when OpenSSH refuses the name or the config (its message quoted), Error when ssh cannot run.
OpenSshHostConfig query_openssh_config(const std::string& host, const std::string& config_file,
                                       std::chrono::milliseconds timeout);

// What query_openssh_config gives for `host`, from one `ssh -G` shared by every host that OpenSSH
// configures alike (OpenSshConfigIndex, openssh_config_index.hpp): the first such host runs it, the
// others (on any thread) wait for it, at most `timeout` longer, and take its answer with their own name
// as hostname unless a HostName line applies. A host whose shared run failed, or whose config may
// depend on its name, runs its own (and gets its own error). Its errors are query_openssh_config's.
OpenSshHostConfig openssh_config_for(const std::string& host, const std::string& config_file,
                                     std::chrono::milliseconds timeout);

// How the `ssh` that runs a ProxyJump is told to behave like hvrun's own connection.
struct JumpSettings {
  std::string config_file;  // passed with -F when not empty: the hops are looked up in the same config
  std::string known_hosts;  // passed as UserKnownHostsFile when not empty
  bool strict_host_key = false;  // unknown hop keys refused (else recorded, as hvrun does for its hosts)
};

// The ProxyCommand that reaches the target through the `jumps` of a ProxyJump, as OpenSSH does it:
// `ssh -W [%h]:%p` through the first hop, the rest given with -J; every hop quoted for /bin/sh. The
// hops' ssh never prompts (BatchMode), as hvrun never does.
std::string proxy_jump_command(const std::string& jumps, const JumpSettings& settings);

// The passwd home directory of this user (OpenSSH's "~"; it ignores $HOME). Throws Error if unknown.
std::string passwd_home();

}  // namespace hvrun

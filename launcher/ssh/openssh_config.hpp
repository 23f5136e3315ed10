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
  // UserKnownHostsFile's files as `ssh -G` prints them (~ and % tokens expanded; "none" kept); empty when
  // they are OpenSSH's default (~/.ssh/known_hosts and ~/.ssh/known_hosts2 of the passwd home).
  std::vector<std::string> user_known_hosts;
  std::vector<std::string> global_known_hosts;  // GlobalKnownHostsFile's files, OpenSSH's default included
  // StrictHostKeyChecking as `ssh -G` prints it ("true", "false", "accept-new", "ask"); empty when no line
  // of the config applies to the host (OpenSSH then prints its default, "ask", which hvrun does not take).
  std::string strict_host_key_checking;
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

// The hops of a ProxyJump value, in the order they are reached, each as `ssh` takes it as a destination
// ([user@]host, or ssh://[user@]host:port when it names a port).
std::vector<std::string> proxy_jump_hops(const std::string& jumps);

// One hop of a ProxyJump for proxy_jump_command: its destination (proxy_jump_hops) and the `-o` options
// that give its `ssh` hvrun's host-key policy for it (host_key_policy.hpp), quoted for /bin/sh.
struct JumpHop {
  std::string destination;
  std::string options;
};

// The ProxyCommand that reaches the target through `hops`, first to last: `ssh -W [%h]:%p` to the last
// hop, which reaches it through a ProxyCommand of the same kind to the hop before, and so on (OpenSSH's
// own -J would not pass each hop its options). `config_file` (when not empty) is passed with -F: the hops
// are looked up in the same config. The hops' ssh never prompts (BatchMode), as hvrun never does. Each
// level's %-tokens are escaped once more (libssh expands the whole command once, each ssh its own
// ProxyCommand); every word quoted for /bin/sh.
std::string proxy_jump_command(const std::vector<JumpHop>& hops, const std::string& config_file);

// The passwd home directory of this user (OpenSSH's "~"; it ignores $HOME). Throws Error if unknown.
std::string passwd_home();

}  // namespace hvrun

#pragma once
// One SSH connection to one host (libssh underneath, kept out of this header).
//
// connect() honours the user's OpenSSH set-up: the ssh config as OpenSSH's `ssh -G` reads it for the
// host as written (Host aliases with any characters OpenSSH takes, case-sensitive patterns, Include,
// Match; HostName, User, Port, IdentityFile, UserKnownHostsFile, ProxyCommand, ProxyJump; see
// openssh_config.hpp), ssh-agent, the default identities, and <ssh_dir>/known_hosts with `[host]:port`
// entries under the HostName, as OpenSSH records them. It never prompts: a host that wants a password, or
// a key's passphrase, fails at once with the fix in the message.
//
// Thread safety: an SshSession is used by one thread at a time; different sessions may be used from
// different threads in parallel (connecting to N hosts from N threads is the intended use; libssh is
// initialised once, on the first connect). SshExec's methods may be called from any thread. Inside,
// every libssh call on a connection holds that connection's lock, so run() and upload() still work
// while an exec is pumped (the I/O thread leaves this connection alone while they hold it).
// A moved-from SshSession may only be destroyed or assigned to.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/ssh/ssh_exec.hpp"

namespace hvrun {

namespace ssh_detail {
class Core;
}  // namespace ssh_detail

struct SshTarget {
  std::string host;                 // as the user wrote it: an ~/.ssh/config alias, a name, an address,
                                    // optionally user@host
  std::optional<int> port;          // -p: overrides Port from the config for every host
  std::string identity_file;        // -i: tried first, before config IdentityFile and the defaults
  std::chrono::milliseconds connect_timeout{10'000};  // name lookup + TCP connect; again for the
                                                      // handshake and each later libssh round trip
  bool strict_host_key = false;     // refuse hosts missing from known_hosts instead of recording them
  std::string ssh_dir;              // empty: $HOME/.ssh (honours $HOME, unlike libssh's default)
  // Dead-connection detection while an exec is live (OpenSSH's ServerAliveInterval/CountMax): after
  // `keepalive_interval` of silence a keepalive is sent; after keepalive_interval * keepalive_count_max
  // of silence the connection is presumed dead.
  std::chrono::milliseconds keepalive_interval{5'000};
  int keepalive_count_max = 3;
};

// What went wrong, for callers that react differently (retry, report, refuse the whole launch).
enum class SshFailure {
  kNameResolution,     // the host name does not resolve
  kConnectionRefused,  // nothing listens on the port
  kUnreachable,        // no route to the address
  kConnectTimeout,     // no answer (TCP or SSH greeting) within the connect timeout
  kHostKeyChanged,     // known_hosts has another key for this host
  kHostKeyUnknown,     // strict host key checking, and the host is not in known_hosts
  kAuthDenied,         // no key accepted, or the server wants a password
  kIdentityFile,       // the -i file cannot be read
  kConfig,             // the ssh config or the host name cannot be applied
  kKnownHostsFile,     // known_hosts cannot be read or appended to
  kHandshake,          // the SSH handshake failed otherwise (not an SSH server, no common algorithm)
  kConnectionLost,     // the connection died after it was up
  kChannel,            // the server refused a channel or the command
  kFileTransfer,       // an SFTP step failed
  kCommandTimeout,     // run() or upload() did not finish within its timeout
};

// Every message is one line that starts with "HOST: " (the host as the user wrote it) and names the
// port, e.g. "node3: connection refused by 10.0.0.3 port 2222 (...)".
class SshError : public Error {
 public:
  SshError(SshFailure failure, std::string host, int port, const std::string& message);
  SshFailure failure() const noexcept { return failure_; }
  const std::string& host() const noexcept { return host_; }
  int port() const noexcept { return port_; }

 private:
  SshFailure failure_;
  std::string host_;
  int port_;
};

struct RunResult {
  int exit_status = -1;     // the remote exit code; -1 when the command died by a signal
  std::string exit_signal;  // "TERM", "KILL", ... when it died by a signal
  std::string out;          // stdout, at most SshSession::kRunCaptureLimit bytes (the rest is dropped)
  std::string err;          // stderr, likewise
};

// One file for SshSession::upload_files: `local_path` to `remote_path`, which then has `mode`.
struct FileCopy {
  std::string local_path;
  std::string remote_path;
  std::uint32_t mode = 0600;
};

class SshSession {
 public:
  static constexpr std::size_t kRunCaptureLimit = 1 << 20;

  // Connects, checks the host key and authenticates. Throws SshError (classified, one line), or
  // UsageError for a host string that cannot be a host.
  static SshSession connect(const SshTarget& target);

  SshSession(SshSession&&) noexcept;
  SshSession& operator=(SshSession&&) noexcept;
  ~SshSession();

  const std::string& host() const;      // as the user wrote it
  const std::string& hostname() const;  // after HostName from the config
  int port() const;
  const std::string& user() const;

  // Runs a short command (e.g. `test -x PATH`) with no stdin and collects its output. Throws
  // SshError kCommandTimeout if it has not ended within `timeout` (the channel is then closed).
  RunResult run(const std::string& command, std::chrono::milliseconds timeout);

  // Starts `command` and bridges its stdin/stdout to a socketpair (see SshExec).
  SshExec exec(const std::string& command);

  // Copies a local file over SFTP: creates missing parent directories (mode 0700), writes a temporary
  // name beside `remote_path`, sets `mode`, renames it into place and checks size and mode. A relative
  // `remote_path` is relative to the remote home directory. Throws SshError kFileTransfer (or
  // kCommandTimeout after `timeout`, which leaves the session unusable).
  void upload(const std::string& local_path, const std::string& remote_path, std::uint32_t mode = 0700,
              std::chrono::milliseconds timeout = std::chrono::minutes(5));
  // The same for several files over one SFTP session, in order, all within `timeout`; missing parent
  // directories get `directory_mode` (less the remote umask). `copied` (may be empty) runs after each
  // file with its size. A failure stops at that file: the ones before it are in place.
  void upload_files(const std::vector<FileCopy>& files, std::uint32_t directory_mode, std::chrono::milliseconds timeout,
                    const std::function<void(std::uint64_t)>& copied = {});

 private:
  explicit SshSession(std::shared_ptr<ssh_detail::Core> core);
  std::shared_ptr<ssh_detail::Core> core_;
};

}  // namespace hvrun

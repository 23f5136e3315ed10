#include "launcher/ssh/ssh_session.hpp"

#include <fcntl.h>
#include <libssh/sftp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "launcher/ssh/openssh_config.hpp"
#include "launcher/ssh/ssh_core.hpp"
#include "launcher/ssh/tcp_dial.hpp"

namespace hvrun {

using ssh_detail::Channel;
using ssh_detail::Clock;
using ssh_detail::Core;
using ssh_detail::seconds_text;
using ssh_detail::SessionLock;
using ssh_detail::Waiter;

const char* to_string(SshFailure failure) {
  switch (failure) {
    case SshFailure::kNameResolution: return "name-resolution";
    case SshFailure::kConnectionRefused: return "connection-refused";
    case SshFailure::kUnreachable: return "unreachable";
    case SshFailure::kConnectTimeout: return "connect-timeout";
    case SshFailure::kHostKeyChanged: return "host-key-changed";
    case SshFailure::kHostKeyUnknown: return "host-key-unknown";
    case SshFailure::kAuthDenied: return "auth-denied";
    case SshFailure::kIdentityFile: return "identity-file";
    case SshFailure::kConfig: return "config";
    case SshFailure::kKnownHostsFile: return "known-hosts-file";
    case SshFailure::kHandshake: return "handshake";
    case SshFailure::kConnectionLost: return "connection-lost";
    case SshFailure::kChannel: return "channel";
    case SshFailure::kFileTransfer: return "file-transfer";
    case SshFailure::kCommandTimeout: return "command-timeout";
  }
  return "unknown";
}

SshError::SshError(SshFailure failure, std::string host, int port, const std::string& message)
    : Error(message), failure_(failure), host_(std::move(host)), port_(port) {}

namespace {

constexpr std::size_t kChunk = 64 * 1024;

// --- connect helpers ------------------------------------------------------------------------------

std::string default_ssh_dir() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.ssh";
  }
  return passwd_home() + "/.ssh";
}

// The file `ssh -G` is to read: none (OpenSSH's own choice, ~/.ssh/config of the passwd home, then
// /etc/ssh/ssh_config) when `ssh_dir` is that home's .ssh; else <ssh_dir>/config (hvrun honours $HOME,
// OpenSSH does not), or /etc/ssh/ssh_config alone when there is no such file.
std::string openssh_config_file(const std::string& ssh_dir) {
  if (ssh_dir == passwd_home() + "/.ssh") return {};
  const std::string user = ssh_dir + "/config";
  if (::access(user.c_str(), F_OK) == 0) return user;
  return "/etc/ssh/ssh_config";
}

// "~/x" as OpenSSH prints an unexpanded IdentityFile: ~ is the directory above `ssh_dir`.
std::string expand_tilde(const std::string& path, const std::string& ssh_dir) {
  if (path.rfind("~/", 0) != 0) return path;
  return ssh_dir.substr(0, ssh_dir.rfind('/')) + path.substr(1);
}

// libssh parses SSH_OPTIONS_HOST as [user@]host[:port]; a bare IPv6 literal needs its brackets.
std::string host_for_libssh(const std::string& host) {
  auto at = host.rfind('@');
  std::string user = at == std::string::npos ? "" : host.substr(0, at + 1);
  std::string name = at == std::string::npos ? host : host.substr(at + 1);
  if (name.find(':') != std::string::npos && name.front() != '[') name = "[" + name + "]";
  return user + name;
}

std::string get_option(ssh_session session, ssh_options_e type) {
  char* value = nullptr;
  if (ssh_options_get(session, type, &value) != SSH_OK || value == nullptr) return {};
  std::string text = value;
  ssh_string_free_char(value);
  return text;
}

void set_option(Core& core, ssh_options_e type, const void* value, const std::string& what) {
  if (ssh_options_set(core.session(), type, value) != SSH_OK) {
    throw core.error(SshFailure::kConfig, "cannot apply " + what + " (ssh_options_set: " + core.libssh_error() + ")");
  }
}

void check_identity_file(Core& core, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    throw core.error(SshFailure::kIdentityFile,
                     "cannot read identity file " + path + " given with -i (open: " + std::strerror(errno) + ")");
  }
}

SshError dial_error(const Core& core, const DialResult& dial, std::chrono::milliseconds timeout) {
  const std::string port = std::to_string(core.port);
  switch (dial.failure) {
    case DialFailure::kNameResolution:
      return core.error(SshFailure::kNameResolution, "cannot resolve host name '" + core.hostname + "' (port " +
                                                         port + "): " + dial.detail +
                                                         " (check the name, /etc/hosts or DNS, or give a HostName "
                                                         "for it in ~/.ssh/config)");
    case DialFailure::kRefused:
      return core.error(SshFailure::kConnectionRefused,
                        "connection refused by " + dial.address + " port " + port +
                            " (no sshd listening there? check -p, or Port in ~/.ssh/config)");
    case DialFailure::kUnreachable:
      return core.error(SshFailure::kUnreachable, "cannot reach " + dial.address + " port " + port + ": " +
                                                      dial.detail + " (no route from this host; check the address)");
    case DialFailure::kTimeout:
      return core.error(SshFailure::kConnectTimeout,
                        "no answer from " + dial.address + " port " + port + " within " + seconds_text(timeout) +
                            " (host down, or a firewall dropping packets; --ssh-connect-timeout sets the wait)");
    case DialFailure::kOther:
    case DialFailure::kNone:
      break;
  }
  return core.error(SshFailure::kUnreachable,
                    "cannot connect to " + dial.address + " port " + port + ": " + dial.detail);
}

std::string server_key_fingerprint(ssh_session session) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session, &key) != SSH_OK) return "(unknown key)";
  unsigned char* hash = nullptr;
  size_t length = 0;
  std::string text = "(unknown key)";
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) == SSH_OK) {
    char* printable = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
    if (printable != nullptr) {
      text = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + printable;
      ssh_string_free_char(printable);
    }
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  return text;
}

// `alias`: the config's HostKeyAlias; known_hosts is then checked under that name alone, no port, as
// OpenSSH does. libssh checks under its host and port options: the connection is up, so they are free
// to be pointed at the alias now.
void verify_host_key(Core& core, bool strict, const std::string& alias) {
  ssh_session session = core.session();
  const std::string port = std::to_string(core.port);
  std::string entry = core.port == 22 ? core.hostname : "[" + core.hostname + "]:" + port;
  if (!alias.empty()) {
    if (ssh_options_set(session, SSH_OPTIONS_HOST, alias.c_str()) != SSH_OK) {
      throw UsageError(core.host + ": HostKeyAlias '" + alias + "' in the ssh config is not a name hvrun can check "
                       "known_hosts under; use only letters, digits, '-' and '.' in it");
    }
    int standard = 22;
    set_option(core, SSH_OPTIONS_PORT, &standard, "port of HostKeyAlias " + alias);
    entry = alias;
  }
  switch (ssh_session_is_known_server(session)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:  // only a key of another type is known: treat it as a change too
      throw core.error(SshFailure::kHostKeyChanged,
                       "host key changed (possible man-in-the-middle); remove the old key with: ssh-keygen -R '" +
                           entry + "' -f " + core.known_hosts);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND: {
      std::string fingerprint = server_key_fingerprint(session);
      if (strict) {
        throw core.error(SshFailure::kHostKeyUnknown,
                         "host key unknown (" + entry + " is not in " + core.known_hosts +
                             ") and strict host key checking is on; check the key (" + fingerprint +
                             ") and add it with: ssh-keyscan -p " + port + " " + core.hostname + " >> " +
                             core.known_hosts);
      }
      if (ssh_session_update_known_hosts(session) != SSH_OK) {
        throw core.error(SshFailure::kKnownHostsFile, "cannot record the host key of " + entry + " in " +
                                                          core.known_hosts + ": " + core.libssh_error());
      }
      spdlog::info("{}: new host, recorded its key ({}) in {} as {}", core.host, fingerprint, core.known_hosts,
                   entry);
      return;
    }
    case SSH_KNOWN_HOSTS_ERROR:
      break;
  }
  throw core.error(SshFailure::kKnownHostsFile,
                   "cannot check the host key of " + entry + " against " + core.known_hosts + ": " +
                       core.libssh_error());
}

std::string methods_text(int methods) {
  std::string text;
  auto add = [&](int bit, const char* name) {
    if ((methods & bit) == 0) return;
    if (!text.empty()) text += ", ";
    text += name;
  };
  add(SSH_AUTH_METHOD_PUBLICKEY, "publickey");
  add(SSH_AUTH_METHOD_PASSWORD, "password");
  add(SSH_AUTH_METHOD_INTERACTIVE, "keyboard-interactive");
  add(SSH_AUTH_METHOD_HOSTBASED, "hostbased");
  add(SSH_AUTH_METHOD_GSSAPI_MIC, "gssapi-with-mic");
  return text.empty() ? "nothing" : text;
}

void authenticate(Core& core) {
  ssh_session session = core.session();
  const std::string fix =
      "copy your key there (ssh-copy-id -p " + std::to_string(core.port) + " " + core.host + ") or pass -i";
  int rc = ssh_userauth_none(session, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return;
  if (rc == SSH_AUTH_ERROR) {
    throw core.error(SshFailure::kHandshake, "authentication failed (ssh_userauth_none: " + core.libssh_error() + ")");
  }
  int methods = ssh_userauth_list(session, nullptr);
  if ((methods & SSH_AUTH_METHOD_PUBLICKEY) == 0) {
    throw core.error(SshFailure::kAuthDenied, "permission denied (the server accepts only " + methods_text(methods) +
                                                  ", and hvrun never prompts); enable publickey there, " + fix);
  }
  // ssh-agent first, then the identities: -i, the config's IdentityFile, the default ids.
  rc = ssh_userauth_publickey_auto(session, nullptr, nullptr);
  switch (rc) {
    case SSH_AUTH_SUCCESS:
      return;
    case SSH_AUTH_PARTIAL:
      throw core.error(SshFailure::kAuthDenied,
                       "permission denied (a key was accepted but the server also wants " +
                           methods_text(ssh_userauth_list(session, nullptr)) + ", and hvrun never prompts)");
    case SSH_AUTH_DENIED:
      throw core.error(SshFailure::kAuthDenied, "permission denied (publickey); " + fix);
    default:
      break;
  }
  if (ssh_is_connected(session) == 0) {
    // e.g. "Too many authentication failures": the server hung up while we offered keys.
    throw core.error(SshFailure::kAuthDenied,
                     "permission denied (publickey; the server hung up: " + core.libssh_error() + "); " + fix);
  }
  throw core.error(SshFailure::kHandshake,
                   "authentication failed (ssh_userauth_publickey_auto: " + core.libssh_error() + ")");
}

// --- run helpers ----------------------------------------------------------------------------------

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

SshError lost_or(const Core& core, SshFailure otherwise, const std::string& what) {
  if (ssh_is_connected(core.session()) == 0) {
    return core.error(SshFailure::kConnectionLost, "connection lost (" + core.libssh_error() + ")");
  }
  return core.error(otherwise, what + ": " + core.libssh_error());
}

// Moves what libssh holds for one stream into `sink` (up to `limit` bytes kept). Under the lock.
void read_available(const Core& core, ssh_channel channel, int is_stderr, std::string& sink, std::size_t limit,
                    std::vector<char>& buffer) {
  for (;;) {
    int n = ssh_channel_read_nonblocking(channel, buffer.data(), static_cast<uint32_t>(buffer.size()), is_stderr);
    if (n == SSH_ERROR) throw lost_or(core, SshFailure::kChannel, "ssh_channel_read_nonblocking");
    if (n <= 0) return;  // nothing now (0) or SSH_EOF
    std::size_t keep = std::min<std::size_t>(static_cast<std::size_t>(n), limit - std::min(limit, sink.size()));
    sink.append(buffer.data(), keep);
  }
}

// --- upload helpers -------------------------------------------------------------------------------

// Shuts the connection's socket down if `deadline` passes before the watchdog is destroyed: libssh's
// SFTP calls retry reads forever, and a socket shut down is the one thing that makes them return.
class Watchdog {
 public:
  Watchdog(UniqueFd socket, Clock::time_point deadline)
      : socket_(std::move(socket)), thread_([this, deadline](std::stop_token stop) {
          std::unique_lock lock(mu_);
          if (cv_.wait_until(lock, stop, deadline, [] { return false; }) || stop.stop_requested()) return;
          fired_ = true;
          ::shutdown(socket_.get(), SHUT_RDWR);
        }) {}
  ~Watchdog() {
    thread_.request_stop();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  UniqueFd socket_;  // a dup of the session's socket: shutdown() reaches the socket even if libssh closed its fd
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool fired_ = false;
  std::jthread thread_;
};

struct SftpSessionFree {
  void operator()(sftp_session sftp) const { sftp_free(sftp); }
};
struct SftpFileClose {
  void operator()(sftp_file file) const { sftp_close(file); }
};
struct SftpAttributesFree {
  void operator()(sftp_attributes attributes) const { sftp_attributes_free(attributes); }
};
using SftpSession = std::unique_ptr<sftp_session_struct, SftpSessionFree>;
using SftpFile = std::unique_ptr<sftp_file_struct, SftpFileClose>;
using SftpAttributes = std::unique_ptr<sftp_attributes_struct, SftpAttributesFree>;

const char* sftp_error_text(int code) {
  switch (code) {
    case SSH_FX_OK: return "ok";
    case SSH_FX_EOF: return "end of file";
    case SSH_FX_NO_SUCH_FILE: return "no such file";
    case SSH_FX_PERMISSION_DENIED: return "permission denied";
    case SSH_FX_FAILURE: return "failure";
    case SSH_FX_BAD_MESSAGE: return "bad message";
    case SSH_FX_NO_CONNECTION: return "no connection";
    case SSH_FX_CONNECTION_LOST: return "connection lost";
    case SSH_FX_OP_UNSUPPORTED: return "operation unsupported";
    case SSH_FX_INVALID_HANDLE: return "invalid handle";
    case SSH_FX_NO_SUCH_PATH: return "no such path";
    case SSH_FX_FILE_ALREADY_EXISTS: return "file already exists";
    case SSH_FX_WRITE_PROTECT: return "write-protected";
    case SSH_FX_NO_MEDIA: return "no media";
    default: return "unknown SFTP error";
  }
}

// One upload under way: names for messages, and the SFTP calls with their checks.
class Upload {
 public:
  Upload(Core& core, std::string local, std::string remote)
      : core_(core), local_(std::move(local)), remote_(std::move(remote)) {}

  SshError fail(const std::string& step) const {
    if (ssh_is_connected(core_.session()) == 0) {
      return core_.error(SshFailure::kConnectionLost, "connection lost during upload of " + local_ + " to " + remote_ +
                                                          " (" + core_.libssh_error() + ")");
    }
    std::string detail = step;
    if (sftp_) detail += ": " + std::string(sftp_error_text(sftp_get_error(sftp_.get())));
    return core_.error(SshFailure::kFileTransfer, "upload of " + local_ + " to " + remote_ + " failed (" + detail +
                                                      "; libssh: " + core_.libssh_error() + ")");
  }

  void start() {
    sftp_.reset(sftp_new(core_.session()));
    if (!sftp_) throw fail("sftp_new");
    if (sftp_init(sftp_.get()) != SSH_OK) throw fail("sftp_init");
  }

  SftpAttributes stat(const std::string& path) { return SftpAttributes(sftp_stat(sftp_.get(), path.c_str())); }

  void make_directory(const std::string& dir) {
    if (auto attributes = stat(dir)) {
      if (attributes->type != SSH_FILEXFER_TYPE_DIRECTORY) throw fail(dir + " exists and is not a directory");
      return;
    }
    if (sftp_mkdir(sftp_.get(), dir.c_str(), 0700) == 0) return;
    auto attributes = stat(dir);  // another launcher may have made it meanwhile
    if (!attributes || attributes->type != SSH_FILEXFER_TYPE_DIRECTORY) throw fail("sftp_mkdir " + dir);
  }

  void make_parents() {
    auto slash = remote_.rfind('/');
    if (slash == std::string::npos || slash == 0) return;
    const std::string parent = remote_.substr(0, slash);
    if (auto attributes = stat(parent); attributes && attributes->type == SSH_FILEXFER_TYPE_DIRECTORY) return;
    for (std::size_t end = parent.find('/', 1); ; end = parent.find('/', end + 1)) {
      std::string prefix = parent.substr(0, end);
      if (!prefix.empty() && prefix.back() != '/') make_directory(prefix);
      if (end == std::string::npos) break;
    }
  }

  void write_temporary(int local_fd, const std::string& temporary, std::uint32_t mode) {
    SftpFile file(sftp_open(sftp_.get(), temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
    if (!file) throw fail("sftp_open " + temporary);
    created_ = temporary;
    std::vector<char> buffer(kChunk);
    for (;;) {
      ssize_t n = ::read(local_fd, buffer.data(), buffer.size());
      if (n == -1 && errno == EINTR) continue;
      if (n == -1) throw_errno("read", local_ + " (upload to " + core_.host + ")");
      if (n == 0) break;
      ssize_t written = sftp_write(file.get(), buffer.data(), static_cast<size_t>(n));
      if (written != n) throw fail("sftp_write " + temporary);
    }
    if (sftp_extension_supported(sftp_.get(), "fsync@openssh.com", "1") != 0 && sftp_fsync(file.get()) != 0) {
      throw fail("sftp_fsync " + temporary);
    }
    if (sftp_close(file.release()) != 0) throw fail("sftp_close " + temporary);
    if (sftp_chmod(sftp_.get(), temporary.c_str(), static_cast<mode_t>(mode)) != 0) {
      throw fail("sftp_chmod " + temporary);
    }
  }

  // SFTP v3 (OpenSSH's server) does not rename over an existing file: remove it and rename again.
  void rename_into_place(const std::string& temporary) {
    if (sftp_rename(sftp_.get(), temporary.c_str(), remote_.c_str()) != 0) {
      if (!stat(remote_)) throw fail("sftp_rename " + temporary + " " + remote_);
      if (sftp_unlink(sftp_.get(), remote_.c_str()) != 0) throw fail("sftp_unlink " + remote_);
      if (sftp_rename(sftp_.get(), temporary.c_str(), remote_.c_str()) != 0) {
        throw fail("sftp_rename " + temporary + " " + remote_);
      }
    }
    created_.clear();
  }

  void verify(off_t size, std::uint32_t mode) {
    auto attributes = stat(remote_);
    if (!attributes) throw fail("sftp_stat " + remote_);
    if (attributes->size != static_cast<std::uint64_t>(size) || (attributes->permissions & 07777) != mode) {
      char text[128];
      std::snprintf(text, sizeof text, "after the copy: %llu bytes mode %04o, expected %llu bytes mode %04o",
                    static_cast<unsigned long long>(attributes->size), attributes->permissions & 07777,
                    static_cast<unsigned long long>(size), mode);
      throw core_.error(SshFailure::kFileTransfer, "upload of " + local_ + " to " + remote_ + " failed (" + text + ")");
    }
  }

  // Removes a temporary file left by a failed upload (best effort).
  ~Upload() {
    if (!created_.empty() && sftp_ && ssh_is_connected(core_.session()) != 0) {
      (void)sftp_unlink(sftp_.get(), created_.c_str());
    }
  }

 private:
  Core& core_;
  std::string local_, remote_;
  SftpSession sftp_;
  std::string created_;  // the temporary file while it exists
};

std::string random_suffix() {
  std::random_device random;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", random(), random());
  return text;
}

}  // namespace

// --- SshSession -----------------------------------------------------------------------------------

SshSession::SshSession(std::shared_ptr<Core> core) : core_(std::move(core)) {}
SshSession::SshSession(SshSession&&) noexcept = default;
SshSession& SshSession::operator=(SshSession&&) noexcept = default;
SshSession::~SshSession() = default;

const std::string& SshSession::host() const { return core_->host; }
const std::string& SshSession::hostname() const { return core_->hostname; }
int SshSession::port() const { return core_->port; }
const std::string& SshSession::user() const { return core_->user; }

SshSession SshSession::connect(const SshTarget& target) {
  ssh_detail::init_libssh();
  if (target.host.empty()) throw UsageError("ssh: empty host name");
  if (target.port && (*target.port <= 0 || *target.port > 65535)) {
    throw UsageError("-p: '" + std::to_string(*target.port) + "' is not a TCP port (1-65535)");
  }
  if (target.connect_timeout.count() <= 0) throw UsageError("ssh connect timeout must be positive");
  auto core = std::make_shared<Core>(target.host);
  core->keepalive_interval = std::max(target.keepalive_interval, std::chrono::milliseconds(1));
  core->keepalive_count_max = std::max(target.keepalive_count_max, 1);
  core->port = target.port.value_or(22);
  core->hostname = target.host;
  ssh_session session = core->session();
  // The core is not shared yet: no other thread can reach it, so no lock until it is returned.

  const std::string ssh_dir = target.ssh_dir.empty() ? default_ssh_dir() : target.ssh_dir;
  set_option(*core, SSH_OPTIONS_SSH_DIR, ssh_dir.c_str(), "ssh directory " + ssh_dir);
  bool process_config = false;  // else ssh_connect would match libssh's parser against the HostName
  set_option(*core, SSH_OPTIONS_PROCESS_CONFIG, &process_config, "no libssh config parsing");
  // The host as written is matched against the config by OpenSSH itself (see openssh_config.hpp); libssh
  // only ever sees what that yields. Its own config parser is not run.
  const std::string config_file = openssh_config_file(ssh_dir);
  const OpenSshHostConfig config = query_openssh_config(target.host, config_file, target.connect_timeout);
  std::string known_hosts = ssh_dir + "/known_hosts";
  if (!config.known_hosts_file.empty()) known_hosts = expand_tilde(config.known_hosts_file, ssh_dir);
  set_option(*core, SSH_OPTIONS_KNOWNHOSTS, known_hosts.c_str(), "known hosts file " + known_hosts);
  if (ssh_options_set(session, SSH_OPTIONS_HOST, host_for_libssh(config.hostname).c_str()) != SSH_OK) {
    // OpenSSH would look such a name up; libssh keeps it from its known_hosts check, so hvrun cannot.
    const std::string written = target.host.substr(target.host.rfind('@') + 1);
    const bool unmatched = strcasecmp(written.c_str(), config.hostname.c_str()) == 0;
    const std::string what = unmatched
                                 ? "matches no Host with a HostName in the ssh config, and is"
                                 : "has HostName '" + config.hostname + "' in the ssh config, which is";
    throw UsageError(target.host + ": " + what +
                     " not a name hvrun can connect to (only letters, digits, '-' and '.'); give it a HostName that "
                     "is an address or a DNS name in ~/.ssh/config");
  }
  set_option(*core, SSH_OPTIONS_PORT, &config.port, "port " + std::to_string(config.port));
  set_option(*core, SSH_OPTIONS_USER, config.user.c_str(), "user " + config.user);
  for (const auto& identity : config.identity_files) {
    const std::string path = expand_tilde(identity, ssh_dir);
    set_option(*core, SSH_OPTIONS_ADD_IDENTITY, path.c_str(), "IdentityFile " + path);
  }
  if (!config.proxy_command.empty()) {
    set_option(*core, SSH_OPTIONS_PROXYCOMMAND, config.proxy_command.c_str(), "ProxyCommand " + config.proxy_command);
  } else if (!config.proxy_jump.empty()) {
    const std::string command =
        proxy_jump_command(config.proxy_jump, JumpSettings{config_file, known_hosts, target.strict_host_key});
    set_option(*core, SSH_OPTIONS_PROXYCOMMAND, command.c_str(), "ProxyJump " + config.proxy_jump);
  }
  if (target.port) {  // -p overrides the config for every host
    int port = *target.port;
    set_option(*core, SSH_OPTIONS_PORT, &port, "port " + std::to_string(port));
  }
  if (!target.identity_file.empty()) {  // -i is tried before the config's IdentityFile and the defaults
    check_identity_file(*core, target.identity_file);
    set_option(*core, SSH_OPTIONS_IDENTITY, target.identity_file.c_str(), "identity file " + target.identity_file);
  }
  // Both fields, so that a ConnectTimeout from the config does not add up with ours.
  long seconds = static_cast<long>(target.connect_timeout.count() / 1000);
  long microseconds = static_cast<long>(target.connect_timeout.count() % 1000) * 1000;
  set_option(*core, SSH_OPTIONS_TIMEOUT, &seconds, "timeout");
  set_option(*core, SSH_OPTIONS_TIMEOUT_USEC, &microseconds, "timeout");

  core->hostname = get_option(session, SSH_OPTIONS_HOST);
  unsigned int port = 22;
  ssh_options_get_port(session, &port);
  core->port = static_cast<int>(port);
  core->known_hosts = known_hosts;

  const std::string proxy = get_option(session, SSH_OPTIONS_PROXYCOMMAND);
  std::string address;
  std::string connect_error;
  int rc;
  if (proxy.empty()) {
    DialResult dial = dial_tcp(core->hostname, core->port, target.connect_timeout);
    if (dial.failure != DialFailure::kNone) throw dial_error(*core, dial, target.connect_timeout);
    address = dial.address;
    int fd = dial.fd.get();
    set_option(*core, SSH_OPTIONS_FD, &fd, "connected socket");
    rc = ssh_connect(session);
    // From here libssh owns the socket: it closes it itself on some errors. Clearing the option makes
    // ssh_disconnect close it too (it leaves an SSH_OPTIONS_FD socket open otherwise). Clearing it sets
    // libssh's error text too ("Invalid argument"), so the connect error is saved first.
    dial.fd.release();
    connect_error = core->libssh_error();
    int none = -1;
    ssh_options_set(session, SSH_OPTIONS_FD, &none);
  } else {
    spdlog::debug("{}: connecting through ProxyCommand '{}'", core->host, proxy);
    address = core->hostname + (config.proxy_command.empty() && !config.proxy_jump.empty()
                                     ? " (via ProxyJump " + config.proxy_jump + ")"
                                     : std::string(" (via ProxyCommand)"));
    rc = ssh_connect(session);
    connect_error = core->libssh_error();
  }
  if (std::string configured = get_option(session, SSH_OPTIONS_KNOWNHOSTS); !configured.empty()) {
    core->known_hosts = configured;  // expanded by ssh_connect; may come from UserKnownHostsFile
  }
  if (rc != SSH_OK) {
    const std::string& why = connect_error;
    if (why.find("Timeout") != std::string::npos) {
      throw core->error(SshFailure::kConnectTimeout,
                        "no SSH answer from " + address + " port " + std::to_string(core->port) + " within " +
                            seconds_text(target.connect_timeout) + " (something accepted the connection but did not "
                            "complete the SSH handshake)");
    }
    // libssh sends a proxy command's stderr to /dev/null: point at the command that shows its error.
    const std::string see = proxy.empty() ? std::string()
                                          : " (the proxy's own error is not shown; see it with: ssh -o BatchMode=yes " +
                                                (config_file.empty() ? "" : "-F " + config_file + " ") + target.host +
                                                " true)";
    throw core->error(SshFailure::kHandshake, "SSH handshake with " + address + " port " +
                                                  std::to_string(core->port) + " failed: " + why + see);
  }
  core->user = get_option(session, SSH_OPTIONS_USER);
  verify_host_key(*core, target.strict_host_key, config.host_key_alias);
  authenticate(*core);
  core->last_received = Clock::now();
  spdlog::debug("{}: connected to {} port {} as {}", core->host, address, core->port, core->user);
  return SshSession(std::move(core));
}

RunResult SshSession::run(const std::string& command, std::chrono::milliseconds timeout) {
  Core& core = *core_;
  const auto deadline = Clock::now() + timeout;
  Waiter waiter(core);
  std::unique_ptr<Channel> channel = Channel::exec(core, command);
  RunResult result;
  std::vector<char> buffer(kChunk);
  bool eof_sent = false;
  for (;;) {
    pollfd fds[2] = {{-1, 0, 0}, {waiter.fd(), POLLIN, 0}};
    bool took_packets;
    {
      SessionLock lock(core, /*nonblocking=*/true, waiter.fd());
      core.throw_if_lost();
      ssh_channel ch = channel->get();
      const auto packets_before = core.packet_counter.in_packets;
      if (!eof_sent) {  // the command gets no stdin
        if (ssh_channel_send_eof(ch) == SSH_ERROR) throw lost_or(core, SshFailure::kChannel, "ssh_channel_send_eof");
        eof_sent = true;
      }
      read_available(core, ch, 1, result.err, kRunCaptureLimit, buffer);
      read_available(core, ch, 0, result.out, kRunCaptureLimit, buffer);
      if (ssh_channel_is_eof(ch) != 0) {
        (void)ssh_channel_get_exit_status(ch);  // nonblocking: takes in what has arrived after the EOF
        if (channel->exited() || ssh_channel_is_closed(ch) != 0) break;
      } else if (ssh_channel_is_closed(ch) != 0) {
        break;
      }
      fds[0].fd = ssh_get_fd(core.session());
      const bool write_pending = (ssh_get_poll_flags(core.session()) & SSH_WRITE_PENDING) != 0;
      fds[0].events = static_cast<short>(POLLIN | (write_pending ? POLLOUT : 0));
      // Packets taken in by the later calls of this round may hold what the earlier ones looked for,
      // and the socket no longer shows them: look again before sleeping.
      took_packets = core.packet_counter.in_packets != packets_before;
    }
    int wait_ms = remaining_ms(deadline);
    if (wait_ms == 0) {
      throw core.error(SshFailure::kCommandTimeout,
                       "'" + command + "' did not finish within " + seconds_text(timeout) + " (port " +
                           std::to_string(core.port) + ")");
    }
    if (took_packets) continue;
    if (::poll(fds, 2, wait_ms) == -1 && errno != EINTR) throw_errno("poll", "SSH connection to " + core.host);
    if (fds[1].revents & POLLIN) waiter.drain();
  }
  if (!channel->exited()) {
    SessionLock lock(core, /*nonblocking=*/true);
    throw lost_or(core, SshFailure::kChannel, "'" + command + "' ended without an exit status");
  }
  result.exit_status = channel->exit_status().value_or(-1);
  result.exit_signal = channel->exit_signal();
  return result;
}

SshExec SshSession::exec(const std::string& command) {
  return SshExec::start(core_, Channel::exec(*core_, command));
}

void SshSession::upload(const std::string& local_path, const std::string& remote_path, std::uint32_t mode,
                        std::chrono::milliseconds timeout) {
  Core& core = *core_;
  if (remote_path.empty() || remote_path.back() == '/') {
    throw UsageError("upload to " + core.host + ": '" + remote_path + "' is not a file path");
  }
  UniqueFd local(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!local) throw_errno("open", local_path + " (upload to " + core.host + ")");
  struct stat info{};
  if (::fstat(local.get(), &info) == -1) throw_errno("fstat", local_path + " (upload to " + core.host + ")");
  if (!S_ISREG(info.st_mode)) throw UsageError("upload to " + core.host + ": " + local_path + " is not a regular file");

  SessionLock lock(core, /*nonblocking=*/false);
  core.throw_if_lost();
  UniqueFd socket(::fcntl(ssh_get_fd(core.session()), F_DUPFD_CLOEXEC, 0));
  if (!socket) throw_errno("fcntl(F_DUPFD_CLOEXEC)", "watchdog for the upload to " + core.host);
  Watchdog watchdog(std::move(socket), Clock::now() + timeout);
  try {
    Upload upload(core, local_path, remote_path);
    upload.start();
    upload.make_parents();
    const std::string temporary = remote_path + ".tmp-" + random_suffix();
    upload.write_temporary(local.get(), temporary, mode);
    upload.rename_into_place(temporary);
    upload.verify(info.st_size, mode);
  } catch (const SshError&) {
    if (!watchdog.fired()) throw;
    core.lost = core.host + ": connection closed after the upload of " + local_path + " did not finish within " +
                seconds_text(timeout) + " (port " + std::to_string(core.port) + ")";
    throw core.error(SshFailure::kCommandTimeout, "upload of " + local_path + " to " + remote_path +
                                                      " did not finish within " + seconds_text(timeout) + " (port " +
                                                      std::to_string(core.port) + ")");
  }
  spdlog::debug("{}: uploaded {} to {} ({} bytes, mode {:o})", core.host, local_path, remote_path,
                static_cast<long long>(info.st_size), mode);
}

}  // namespace hvrun

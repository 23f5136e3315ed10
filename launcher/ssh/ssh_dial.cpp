#include "launcher/ssh/ssh_dial.hpp"

#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/ssh/openssh_config.hpp"
#include "launcher/ssh/tcp_dial.hpp"
#include "common/duration_text.hpp"

namespace hvrun::ssh_detail {

namespace {

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

void check_identity_file(Core& core, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    throw core.error(SshFailure::kIdentityFile,
                     "cannot read identity file " + path + " given with -i (open: " + std::strerror(errno) + ")");
  }
}

// What the ssh of a ProxyJump writes on its stderr (libssh would send it to /dev/null): a file of this
// user's (mkstemp: 0600, a new name), removed when the connection is up or has failed.
struct HopErrors {
  std::string path;
  UniqueFd fd;
  static HopErrors make(const std::string& host) {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp != nullptr && *tmp == '/' ? tmp : "/tmp") + "/hvrun-proxyjump-XXXXXX";
    HopErrors e;
    e.fd = UniqueFd(::mkostemp(name.data(), O_CLOEXEC));
    if (!e.fd) throw_errno("mkostemp", host + ": a file for the ProxyJump's errors in " + name);
    e.path = name;
    return e;
  }
  ~HopErrors() {
    if (!path.empty()) ::unlink(path.c_str());
  }
  HopErrors() = default;
  HopErrors(HopErrors&& other) noexcept : path(std::exchange(other.path, {})), fd(std::move(other.fd)) {}
  HopErrors& operator=(HopErrors&& other) noexcept {
    std::swap(path, other.path);
    std::swap(fd, other.fd);
    return *this;
  }
  // Its lines, joined with "; " (at most 400 bytes: OpenSSH's changed-key warning is long).
  std::string text() const {
    if (!fd) return {};
    std::string raw(4096, '\0');
    const ssize_t n = ::pread(fd.get(), raw.data(), raw.size(), 0);
    if (n <= 0) return {};
    raw.resize(static_cast<std::size_t>(n));
    std::string out;
    std::size_t start = 0;
    while (start < raw.size()) {
      std::size_t end = raw.find('\n', start);
      if (end == std::string::npos) end = raw.size();
      std::string line = raw.substr(start, end - start);
      start = end + 1;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line.find_first_not_of("@ ") == std::string::npos) continue;
      bool noise = false;  // the changed-key warning's sentences that name nothing
      for (const char* said : {"NASTY", "eavesdropping", "It is also possible", "Please contact"})
        noise = noise || line.find(said) != std::string::npos;
      if (noise) continue;
      out += (out.empty() ? "" : "; ") + line;
    }
    return out.size() > 800 ? out.substr(0, 800) + "..." : out;
  }
};

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
}  // namespace

DialedSession dial_session(Core& core, const SshTarget& target) {
  ssh_session session = core.session();

  const std::string ssh_dir = target.ssh_dir.empty() ? default_ssh_dir() : target.ssh_dir;
  set_option(core, SSH_OPTIONS_SSH_DIR, ssh_dir.c_str(), "ssh directory " + ssh_dir);
  bool process_config = false;  // else ssh_connect would match libssh's parser against the HostName
  set_option(core, SSH_OPTIONS_PROCESS_CONFIG, &process_config, "no libssh config parsing");
  // The host as written is matched against the config by OpenSSH itself (see openssh_config.hpp); libssh
  // only ever sees what that yields. Its own config parser is not run.
  const std::string config_file = openssh_config_file(ssh_dir);
  const OpenSshHostConfig config = openssh_config_for(target.host, config_file, target.connect_timeout);
  HopErrors hop_errors;
  const HostKeyPolicy policy = host_key_policy(target.host, config, target.strict_host_key, ssh_dir);
  // libssh reads these during the handshake too (it prefers the key types they hold); verify_host_key
  // checks every file of the policy itself.
  const std::string known_hosts = policy.user_files.empty() ? "/dev/null" : policy.user_files.front();
  set_option(core, SSH_OPTIONS_KNOWNHOSTS, known_hosts.c_str(), "known hosts file " + known_hosts);
  const std::string global = policy.global_files.empty() ? "/dev/null" : policy.global_files.front();
  set_option(core, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, global.c_str(), "global known hosts file " + global);
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
  set_option(core, SSH_OPTIONS_PORT, &config.port, "port " + std::to_string(config.port));
  set_option(core, SSH_OPTIONS_USER, config.user.c_str(), "user " + config.user);
  for (const auto& identity : config.identity_files) {
    const std::string path = expand_tilde(identity, ssh_dir);
    set_option(core, SSH_OPTIONS_ADD_IDENTITY, path.c_str(), "IdentityFile " + path);
  }
  if (!config.proxy_command.empty()) {
    set_option(core, SSH_OPTIONS_PROXYCOMMAND, config.proxy_command.c_str(), "ProxyCommand " + config.proxy_command);
  } else if (!config.proxy_jump.empty()) {
    // Each hop's ssh gets the host-key policy its own config gives it, as the target's is given here.
    std::vector<JumpHop> hops;
    for (const std::string& hop : proxy_jump_hops(config.proxy_jump)) {
      const OpenSshHostConfig hop_config = openssh_config_for(hop, config_file, target.connect_timeout);
      hops.push_back({hop, openssh_options(host_key_policy(hop, hop_config, target.strict_host_key, ssh_dir))});
    }
    hop_errors = HopErrors::make(target.host);
    const std::string command = proxy_jump_command(hops, config_file) + " 2>" + shell_quote(hop_errors.path);
    set_option(core, SSH_OPTIONS_PROXYCOMMAND, command.c_str(), "ProxyJump " + config.proxy_jump);
  }
  if (target.port) {  // -p overrides the config for every host
    int port = *target.port;
    set_option(core, SSH_OPTIONS_PORT, &port, "port " + std::to_string(port));
  }
  if (!target.identity_file.empty()) {  // -i is tried before the config's IdentityFile and the defaults
    check_identity_file(core, target.identity_file);
    set_option(core, SSH_OPTIONS_IDENTITY, target.identity_file.c_str(), "identity file " + target.identity_file);
  }
  // Both fields, so that a ConnectTimeout from the config does not add up with ours.
  long seconds = static_cast<long>(target.connect_timeout.count() / 1000);
  long microseconds = static_cast<long>(target.connect_timeout.count() % 1000) * 1000;
  set_option(core, SSH_OPTIONS_TIMEOUT, &seconds, "timeout");
  set_option(core, SSH_OPTIONS_TIMEOUT_USEC, &microseconds, "timeout");

  core.hostname = get_option(session, SSH_OPTIONS_HOST);
  unsigned int port = 22;
  ssh_options_get_port(session, &port);
  core.port = static_cast<int>(port);
  core.known_hosts = known_hosts;

  const std::string proxy = get_option(session, SSH_OPTIONS_PROXYCOMMAND);
  std::string address;
  std::string connect_error;
  int rc;
  if (proxy.empty()) {
    DialResult dial = dial_tcp(core.hostname, core.port, target.connect_timeout);
    if (dial.failure != DialFailure::kNone) throw dial_error(core, dial, target.connect_timeout);
    address = dial.address;
    int fd = dial.fd.get();
    set_option(core, SSH_OPTIONS_FD, &fd, "connected socket");
    rc = ssh_connect(session);
    // From here libssh owns the socket: it closes it itself on some errors. Clearing the option makes
    // ssh_disconnect close it too (it leaves an SSH_OPTIONS_FD socket open otherwise). Clearing it sets
    // libssh's error text too ("Invalid argument"), so the connect error is saved first.
    dial.fd.release();
    connect_error = core.libssh_error();
    int none = -1;
    ssh_options_set(session, SSH_OPTIONS_FD, &none);
  } else {
    log_of(LogSubsys::kSsh).debug("{}: connecting through ProxyCommand '{}'", core.host, proxy);
    address = core.hostname + (config.proxy_command.empty() && !config.proxy_jump.empty()
                                     ? " (via ProxyJump " + config.proxy_jump + ")"
                                     : std::string(" (via ProxyCommand)"));
    rc = ssh_connect(session);
    connect_error = core.libssh_error();
  }
  if (std::string configured = get_option(session, SSH_OPTIONS_KNOWNHOSTS); !configured.empty()) {
    core.known_hosts = configured;  // expanded by ssh_connect; may come from UserKnownHostsFile
  }
  if (rc != SSH_OK) {
    const std::string& why = connect_error;
    if (why.find("Timeout") != std::string::npos) {
      throw core.error(SshFailure::kConnectTimeout,
                        "no SSH answer from " + address + " port " + std::to_string(core.port) + " within " +
                            seconds_text(target.connect_timeout) + " (something accepted the connection but did not "
                            "complete the SSH handshake)");
    }
    // libssh sends a proxy command's stderr to /dev/null: a ProxyJump's is kept in a file and quoted;
    // for a ProxyCommand, point at the command that shows its error.
    const std::string ssh_line = "ssh -o BatchMode=yes " + (config_file.empty() ? "" : "-F " + config_file + " ");
    const std::string hops_said = hop_errors.text();
    if (hops_said.find("Host key verification failed") != std::string::npos ||
        hops_said.find("REMOTE HOST IDENTIFICATION HAS CHANGED") != std::string::npos) {
      throw core.error(SshFailure::kHostKeyUnknown,
                       "a ProxyJump hop (" + config.proxy_jump + ") refused its host key, as its host-key policy "
                       "says (its ssh said: " + hops_said + "); check the hop's key and add it to its known-hosts "
                       "file (ssh to the hop once: " + ssh_line + "-o StrictHostKeyChecking=ask " +
                       proxy_jump_hops(config.proxy_jump).front() + " true, or ssh-keyscan), or change "
                       "StrictHostKeyChecking/UserKnownHostsFile for it in the ssh config");
    }
    const std::string see = proxy.empty()           ? std::string()
                            : !hops_said.empty()    ? " (the ProxyJump's ssh said: " + hops_said + ")"
                                                    : " (the proxy's own error is not shown; see it with: " + ssh_line +
                                                       target.host + " true)";
    throw core.error(SshFailure::kHandshake, "SSH handshake with " + address + " port " +
                                                  std::to_string(core.port) + " failed: " + why + see);
  }
  core.user = get_option(session, SSH_OPTIONS_USER);
  return DialedSession{address, config.host_key_alias, policy};
}

}  // namespace hvrun::ssh_detail

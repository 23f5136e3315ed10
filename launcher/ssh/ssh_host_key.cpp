#include "launcher/ssh/ssh_host_key.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/log.hpp"

namespace hvrun::ssh_detail {

namespace {

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


}  // namespace

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
      // libssh creates the file's folder itself, but checks and creates in two steps: two hosts recorded at
      // once race there, and the loser fails with EEXIST. The folder is made here first.
      const std::filesystem::path folder = std::filesystem::path(core.known_hosts).parent_path();
      if (!folder.empty() && ::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
        throw core.error(SshFailure::kKnownHostsFile, "cannot record the host key of " + entry + ": mkdir " +
                                                          folder.string() + ": " + std::strerror(errno));
      if (ssh_session_update_known_hosts(session) != SSH_OK) {
        throw core.error(SshFailure::kKnownHostsFile, "cannot record the host key of " + entry + " in " +
                                                          core.known_hosts + ": " + core.libssh_error());
      }
      log_of(LogSubsys::kSsh)
          .info("{}: new host, recorded its key ({}) in {} as {}", core.host, fingerprint, core.known_hosts, entry);
      return;
    }
    case SSH_KNOWN_HOSTS_ERROR:
      break;
  }
  throw core.error(SshFailure::kKnownHostsFile,
                   "cannot check the host key of " + entry + " against " + core.known_hosts + ": " +
                       core.libssh_error());
}

}  // namespace hvrun::ssh_detail

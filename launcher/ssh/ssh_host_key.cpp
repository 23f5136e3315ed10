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

// What the files of a policy say of the server's key, as OpenSSH reads several: known in any is known;
// else another key in any is a change; else unknown.
struct Verdict {
  enum ssh_known_hosts_e state = SSH_KNOWN_HOSTS_UNKNOWN;
  std::string file;  // kChanged: the file with the other key; kError: the file that could not be read
};

Verdict check_files(Core& core, const HostKeyPolicy& policy) {
  ssh_session session = core.session();
  Verdict verdict;
  // libssh checks its user file, then its global one: each file is checked alone, as the user file.
  set_option(core, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null", "no global known hosts file");
  for (const std::string& file : policy.files()) {
    set_option(core, SSH_OPTIONS_KNOWNHOSTS, file.c_str(), "known hosts file " + file);
    switch (ssh_session_is_known_server(session)) {
      case SSH_KNOWN_HOSTS_OK:
        return Verdict{SSH_KNOWN_HOSTS_OK, file};
      case SSH_KNOWN_HOSTS_CHANGED:
      case SSH_KNOWN_HOSTS_OTHER:  // only a key of another type is known: treated as a change too
        if (verdict.state != SSH_KNOWN_HOSTS_CHANGED && verdict.state != SSH_KNOWN_HOSTS_ERROR)
          verdict = Verdict{SSH_KNOWN_HOSTS_CHANGED, file};
        break;
      case SSH_KNOWN_HOSTS_ERROR:
        if (verdict.state != SSH_KNOWN_HOSTS_ERROR) verdict = Verdict{SSH_KNOWN_HOSTS_ERROR, file + ": " + core.libssh_error()};
        break;
      case SSH_KNOWN_HOSTS_UNKNOWN:
      case SSH_KNOWN_HOSTS_NOT_FOUND:
        break;
    }
  }
  return verdict;
}

}  // namespace

void verify_host_key(Core& core, const HostKeyPolicy& policy, const std::string& alias) {
  ssh_session session = core.session();
  const std::string port = std::to_string(core.port);
  std::string entry = core.port == 22 ? core.hostname : "[" + core.hostname + "]:" + port;
  // HostKeyAlias: the files are checked under that name alone, no port, as OpenSSH does. libssh checks
  // under its host and port options: the connection is up, so they are free to be pointed at the alias.
  if (!alias.empty()) {
    if (ssh_options_set(session, SSH_OPTIONS_HOST, alias.c_str()) != SSH_OK) {
      throw UsageError(core.host + ": HostKeyAlias '" + alias + "' in the ssh config is not a name hvrun can check "
                       "known_hosts under; use only letters, digits, '-' and '.' in it");
    }
    int standard = 22;
    set_option(core, SSH_OPTIONS_PORT, &standard, "port of HostKeyAlias " + alias);
    entry = alias;
  }
  const std::string fingerprint = server_key_fingerprint(session);
  const std::string consulted = "known-hosts files consulted: " + policy.files_text() + "; policy: " + policy.source;
  const std::string first_file = policy.user_files.empty() ? std::string() : policy.user_files.front();
  const Verdict verdict = check_files(core, policy);
  // Later ssh_session_update_known_hosts calls write to the first user file.
  if (!first_file.empty()) set_option(core, SSH_OPTIONS_KNOWNHOSTS, first_file.c_str(), "known hosts file " + first_file);
  switch (verdict.state) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_ERROR:
      throw core.error(SshFailure::kKnownHostsFile,
                       "cannot check the host key of " + entry + " against " + verdict.file + "; " + consulted);
    case SSH_KNOWN_HOSTS_CHANGED:
      if (policy.checking == HostKeyChecking::kNo) {
        log_of(LogSubsys::kSsh)
            .warn("{}: host key changed ({} now; {} holds another key for {}), accepted as {} says", core.host,
                  fingerprint, verdict.file, entry, policy.source);
        return;
      }
      throw core.error(SshFailure::kHostKeyChanged,
                       "host key changed (possible man-in-the-middle): " + entry + " now shows " + fingerprint +
                           ", and " + verdict.file + " holds another key for it (" + consulted +
                           "); if the change is expected, remove the old key with: ssh-keygen -R '" + entry +
                           "' -f " + verdict.file);
    default:
      break;
  }
  if (policy.checking == HostKeyChecking::kYes) {
    const std::string add = first_file.empty() ? std::string("a file named by UserKnownHostsFile in the ssh config")
                                               : first_file;
    throw core.error(SshFailure::kHostKeyUnknown,
                     "host key unknown (" + entry + " is not in the " + consulted +
                         "), and unknown hosts are refused; check the key (" + fingerprint +
                         ") and add it: ssh to the host once, or ssh-keyscan -p " + port + " " + core.hostname +
                         " >> " + add + ", or change StrictHostKeyChecking in the ssh config");
  }
  if (first_file.empty()) {
    log_of(LogSubsys::kSsh)
        .warn("{}: new host, key {} accepted as {} says, and not recorded (UserKnownHostsFile none)", core.host,
              fingerprint, policy.source);
    return;
  }
  // libssh creates the file's folder itself, but checks and creates in two steps: two hosts recorded at
  // once race there, and the loser fails with EEXIST. The folder is made here first.
  const std::filesystem::path folder = std::filesystem::path(first_file).parent_path();
  if (!folder.empty() && ::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    throw core.error(SshFailure::kKnownHostsFile, "cannot record the host key of " + entry + ": mkdir " +
                                                      folder.string() + ": " + std::strerror(errno));
  if (ssh_session_update_known_hosts(session) != SSH_OK) {
    throw core.error(SshFailure::kKnownHostsFile, "cannot record the host key of " + entry + " in " + first_file +
                                                      ": " + core.libssh_error());
  }
  log_of(LogSubsys::kSsh).info("{}: new host, recorded its key ({}) in {} as {}", core.host, fingerprint, first_file, entry);
}

}  // namespace hvrun::ssh_detail

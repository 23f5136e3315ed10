#include "launcher/ssh/ssh_auth.hpp"

namespace hvrun::ssh_detail {

namespace {

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

}  // namespace

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

}  // namespace hvrun::ssh_detail

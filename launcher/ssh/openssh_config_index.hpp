#pragma once
// Which hosts OpenSSH's client configures alike, so that one `ssh -G` serves them all (openssh_config_for):
// the config files that `ssh -G` reads, read the same way, deciding no setting itself. Without `Match`
// and canonicalisation, OpenSSH's answer for a host depends on the name only through which `Host` lines
// match it, through `%` tokens, and through HostName's default (the name itself). So two hosts share one
// answer when the same Host lines match both and no line that applies to them and sets what hvrun reads
// (HostName, User, Port, IdentityFile, UserKnownHostsFile, GlobalKnownHostsFile, StrictHostKeyChecking,
// ProxyCommand, ProxyJump, HostKeyAlias) holds a
// token that names the host (%h, %n, %p, %r, %C, ...; %d %u %i %l %L %% are the same for every host).
//
// Every host is left to its own `ssh -G` when the files hold `Match` (it may run commands or test the
// user, the HostName, the local network), `CanonicalizeHostname` other than `no` (the files are read
// again for the canonical name), an `Include` inside a Host block, a quoted Host pattern, or a file that
// cannot be read; and a host is when its name has a capital (OpenSSH lowers it), `@`, `%`, `[`, `/`
// (an ssh:// URI) or whitespace in it.
#include <optional>
#include <string>
#include <vector>

namespace hvrun {

class OpenSshConfigIndex {
 public:
  // Reads what `ssh -G [-F config_file]` reads: `config_file` alone when given, else `home`/.ssh/config
  // then /etc/ssh/ssh_config (`system_file`), each missing file skipped, following top-level Include
  // (globs; relative names against `home`/.ssh for the user's files, /etc/ssh for the system's). Never
  // throws: what it cannot read makes every host its own.
  static OpenSshConfigIndex read(const std::string& config_file, const std::string& home,
                                 const std::string& system_file = "/etc/ssh/ssh_config");

  struct Sharing {
    std::string key;             // equal for hosts that one `ssh -G` serves (the files' contents included)
    bool names_hostname = false;  // a HostName line applies: the answer's hostname holds for all of them
  };
  // How `host` (as written) may share; nullopt when it needs its own `ssh -G`.
  std::optional<Sharing> sharing(const std::string& host) const;
  // Whether a line that applies to `host` may set `keyword` (lower case, one hvrun reads): false only
  // when no such line is in the files, or every one is in a Host block that does not match the host;
  // true whenever the files cannot be judged so (see sharing).
  bool may_set(const std::string& host, const std::string& keyword) const;

 private:
  struct HostLine {
    std::vector<std::string> patterns;  // as written, '!' kept
  };
  struct Setting {
    int block = -1;  // the Host line it follows, -1 before any (it applies to every host)
    std::string keyword;  // lower case
    bool is_hostname = false;
    bool names_host = false;  // its value holds a % token that differs between hosts
  };
  void read_file(const std::string& path, const std::string& relative_to, int depth);
  static bool matches(const HostLine& line, const std::string& host);

  std::string home_;  // OpenSSH's ~ (the passwd home)
  bool unshared_ = false;
  std::string contents_;  // every file read, with its name: a changed file changes every key
  std::vector<HostLine> hosts_;
  std::vector<Setting> settings_;
};

}  // namespace hvrun

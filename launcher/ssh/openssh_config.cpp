#include "launcher/ssh/openssh_config.hpp"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>

#include "common/child_process.hpp"
#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/open_files_limit.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/ssh/openssh_config_index.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kOutputLimit = 1 << 20;  // `ssh -G` prints a few KiB

// OpenSSH's IdentityFile defaults, printed by `ssh -G` only when the config names none.
constexpr std::array<const char*, 7> kDefaultIdentities = {"id_rsa",     "id_ecdsa",        "id_ecdsa_sk", "id_ed25519",
                                                           "id_ed25519_sk", "id_xmss", "id_dsa"};

bool is_default_identity(const std::string& path, const std::string& home) {
  for (const char* name : kDefaultIdentities) {
    if (path == std::string("~/.ssh/") + name || path == home + "/.ssh/" + name) return true;
  }
  return false;
}

// What OpenSSH wrote to stderr, as one line ("line 2: Bad configuration option: x; terminating, ...").
std::string one_line(const std::string& text) {
  constexpr std::size_t kLimit = 300;
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (!out.empty()) out += "; ";
    out += line;
  }
  if (out.size() > kLimit) out = out.substr(0, kLimit) + "...";
  return out;
}

struct Output {
  std::string out, err;
  ExitStatus status;
};

// Runs argv with stdin from /dev/null; both outputs read until they end, within `timeout`.
Output run_capture(const std::vector<std::string>& args, const std::string& host, std::chrono::milliseconds timeout) {
  ChildSpec spec{.argv = args,
                 .stdio = {ChildStream::dev_null(), ChildStream::pipe("stdout of ssh -G"),
                           ChildStream::pipe("stderr of ssh -G")},
                 .start_by = StartBy::kSpawn,
                 .what = "ssh -G for " + host};
  Child child;
  try {
    child = Child::start(spec);
  } catch (const SpawnError& e) {
    throw Error(host + ": cannot run '" + args[0] + " -G' to read the ssh config (posix_spawnp: " +
                std::strerror(e.error_number()) + "); install OpenSSH's client (Debian: apt-get install openssh-client)");
  }
  restore_open_files_limit(child.pid(), spec.what);
  std::optional<ChildOutput> output = child.read_outputs(timeout, kOutputLimit);
  if (!output) {
    throw Error(host + ": 'ssh -G' did not print the ssh config within " + seconds_text(timeout) +
                " (a 'Match exec' command that hangs?); fix ~/.ssh/config or raise --ssh-connect-timeout");
  }
  return Output{std::move(output->out), std::move(output->err), child.wait()};
}

// The space-separated words of a value (ssh -G prints a list of files so).
std::vector<std::string> dump_words(const std::string& value) {
  std::vector<std::string> out;
  for (std::size_t at = value.find_first_not_of(' '); at != std::string::npos; at = value.find_first_not_of(' ', at)) {
    const std::size_t end = value.find(' ', at);
    out.push_back(value.substr(at, end - at));
    at = end;
  }
  return out;
}

}  // namespace

std::string passwd_home() {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    throw Error("ssh: getpwuid_r cannot find the home directory of uid " + std::to_string(getuid()));
  }
  return entry.pw_dir;
}

OpenSshHostConfig parse_openssh_dump(const std::string& text, const std::string& home) {
  std::map<std::string, std::string> first;  // keyword -> value of its first line
  OpenSshHostConfig config;
  std::vector<std::string> identities;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const auto space = line.find(' ');
    if (space == std::string::npos || space == 0) continue;
    const std::string keyword = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    if (keyword == "identityfile") identities.push_back(value);
    first.emplace(keyword, value);
  }
  auto need = [&](const char* keyword) -> const std::string& {
    auto it = first.find(keyword);
    if (it == first.end() || it->second.empty()) {
      throw Error(std::string("ssh -G printed no '") + keyword + "' line (is 'ssh' OpenSSH's client?)");
    }
    return it->second;
  };
  config.hostname = need("hostname");
  // OpenSSH prints an IPv6 address given in brackets with them; the brackets are not part of the name.
  if (config.hostname.size() > 2 && config.hostname.front() == '[' && config.hostname.back() == ']') {
    config.hostname = config.hostname.substr(1, config.hostname.size() - 2);
  }
  config.user = need("user");
  const std::string& port = need("port");
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), config.port);
  if (ec != std::errc() || ptr != port.data() + port.size() || config.port <= 0 || config.port > 65535) {
    throw Error("ssh -G printed port '" + port + "', not a TCP port");
  }
  for (const auto& path : identities) {
    if (!is_default_identity(path, home)) config.identity_files.push_back(path);
  }
  if (auto it = first.find("userknownhostsfile"); it != first.end()) {
    config.user_known_hosts = dump_words(it->second);
    const auto is_default = [&](const std::vector<std::string>& prefixes) {
      for (const std::string& at : prefixes)
        if (config.user_known_hosts == std::vector<std::string>{at + "/.ssh/known_hosts", at + "/.ssh/known_hosts2"})
          return true;
      return false;
    };
    if (is_default({home, "~"})) config.user_known_hosts.clear();
  }
  if (auto it = first.find("globalknownhostsfile"); it != first.end()) config.global_known_hosts = dump_words(it->second);
  if (auto it = first.find("stricthostkeychecking"); it != first.end()) config.strict_host_key_checking = it->second;
  if (auto it = first.find("proxycommand"); it != first.end() && it->second != "none") {
    config.proxy_command = it->second;
  }
  if (auto it = first.find("proxyjump"); it != first.end() && it->second != "none") config.proxy_jump = it->second;
  if (auto it = first.find("hostkeyalias"); it != first.end()) config.host_key_alias = it->second;
  return config;
}

OpenSshHostConfig query_openssh_config(const std::string& host, const std::string& config_file,
                                       std::chrono::milliseconds timeout) {
  std::vector<std::string> args = {"ssh", "-T", "-G"};  // -T: no "Pseudo-terminal will not be allocated" noise
  if (!config_file.empty()) {
    args.push_back("-F");
    args.push_back(config_file);
  }
  args.push_back("--");
  args.push_back(host);
  Output output = run_capture(args, host, timeout);
  if (output.status.code != 0) {
    const std::string said = one_line(output.err);
    const std::string where = config_file.empty() ? "~/.ssh/config or /etc/ssh/ssh_config" : config_file;
    const std::string dash_f = config_file.empty() ? "" : "-F " + config_file + " ";
    throw UsageError(host + ": ssh refuses this host or its config" +
                     (said.empty() ? std::string() : " ('ssh -G' said: " + said + ")") + "; check the name and " +
                     where + " with: ssh -G " + dash_f + host);
  }
  try {
    const std::string home = passwd_home();
    OpenSshHostConfig config = parse_openssh_dump(output.out, home);
    // "ask" is also what OpenSSH prints when nothing sets it: then hvrun's own default applies.
    if (config.strict_host_key_checking == "ask" &&
        !OpenSshConfigIndex::read(config_file, home).may_set(host, "stricthostkeychecking"))
      config.strict_host_key_checking.clear();
    return config;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw Error(host + ": " + e.what());
  }
}

OpenSshHostConfig openssh_config_for(const std::string& host, const std::string& config_file,
                                     std::chrono::milliseconds timeout) {
  const auto sharing = OpenSshConfigIndex::read(config_file, passwd_home()).sharing(host);
  if (!sharing) return query_openssh_config(host, config_file, timeout);
  // One answer per key for the process: the key holds the files' contents, so an edited file is read anew.
  static std::mutex mutex;
  static std::map<std::string, std::shared_future<std::optional<OpenSshHostConfig>>> answers;
  const std::string key = config_file + '\0' + sharing->key;
  std::promise<std::optional<OpenSshHostConfig>> mine;
  std::shared_future<std::optional<OpenSshHostConfig>> theirs;
  {
    std::lock_guard lock(mutex);
    const auto [it, first] = answers.try_emplace(key, mine.get_future().share());
    if (!first) theirs = it->second;
  }
  if (!theirs.valid()) {
    try {
      OpenSshHostConfig config = query_openssh_config(host, config_file, timeout);
      mine.set_value(config);
      return config;
    } catch (...) {
      mine.set_value(std::nullopt);  // the others run their own, and get their own error
      throw;
    }
  }
  if (theirs.wait_for(timeout) != std::future_status::ready || !theirs.get())
    return query_openssh_config(host, config_file, timeout);
  OpenSshHostConfig config = *theirs.get();
  if (!sharing->names_hostname) config.hostname = host;  // OpenSSH's default: the name as written
  return config;
}

std::vector<std::string> proxy_jump_hops(const std::string& jumps) {
  std::vector<std::string> hops;
  for (std::size_t at = 0; at <= jumps.size();) {
    std::size_t comma = jumps.find(',', at);
    if (comma == std::string::npos) comma = jumps.size();
    std::string hop = jumps.substr(at, comma - at);
    // `ssh` takes host:port as a destination only in URI form.
    if (!hop.empty() && hop.rfind("ssh://", 0) != 0 && hop.find(':') != std::string::npos) hop = "ssh://" + hop;
    if (!hop.empty()) hops.push_back(hop);
    at = comma + 1;
  }
  return hops;
}

std::string proxy_jump_command(const std::vector<JumpHop>& hops, const std::string& config_file) {
  std::string command;
  for (const JumpHop& hop : hops) {
    // LogLevel=ERROR: no "Permanently added ..." line from the hops; a refused host key still shows.
    std::string level = "ssh -o BatchMode=yes -o LogLevel=ERROR";
    if (!hop.options.empty()) level += " " + hop.options;
    if (!config_file.empty()) level += " -F " + shell_quote(config_file);
    if (!command.empty()) {
      // The hop before: run by this level's ssh, which expands its %-tokens (so they are doubled here)
      // and prefixes it with exec itself.
      std::string escaped;
      for (const char c : command) escaped += c == '%' ? std::string("%%") : std::string(1, c);
      level += " -o " + shell_quote("ProxyCommand=" + escaped);
    }
    command = level + " -W '[%h]:%p' -- " + shell_quote(hop.destination);
  }
  return "exec " + command;
}

}  // namespace hvrun

#include "launcher/ssh/host_key_policy.hpp"

#include "common/error.hpp"
#include "launcher/base/shell_quote.hpp"

namespace hvrun {

namespace {

std::string known_hosts_joined(const std::vector<std::string>& files, const std::string& separator, const std::string& last) {
  std::string out;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (i > 0) out += i + 1 == files.size() ? last : separator;
    out += files[i];
  }
  return out;
}

// The files of a known-hosts list as OpenSSH reads them: "none" alone names no file.
std::vector<std::string> known_hosts_listed(const std::vector<std::string>& listed) {
  if (listed.size() == 1 && listed.front() == "none") return {};
  return listed;
}

// "~/x" (a path OpenSSH left unexpanded): ~ is the directory above `ssh_dir`.
std::string tilde_in_known_hosts(const std::string& path, const std::string& ssh_dir) {
  if (path.rfind("~/", 0) != 0) return path;
  return ssh_dir.substr(0, ssh_dir.rfind('/')) + path.substr(1);
}

}  // namespace

std::vector<std::string> HostKeyPolicy::files() const {
  std::vector<std::string> all = user_files;
  all.insert(all.end(), global_files.begin(), global_files.end());
  return all;
}

std::string HostKeyPolicy::files_text() const {
  const std::vector<std::string> all = files();
  if (all.empty()) return "no file (UserKnownHostsFile and GlobalKnownHostsFile are none)";
  return known_hosts_joined(all, ", ", " and ");
}

HostKeyPolicy host_key_policy(const std::string& host, const OpenSshHostConfig& config, bool strict_flag,
                              const std::string& ssh_dir) {
  HostKeyPolicy policy;
  const std::string& value = config.strict_host_key_checking;
  if (strict_flag) {
    policy.checking = HostKeyChecking::kYes;
    policy.source = "--ssh-strict-host-key-checking";
  } else if (value.empty()) {
    policy.checking = HostKeyChecking::kAcceptNew;
    policy.source = "hvrun's default (StrictHostKeyChecking accept-new)";
  } else if (value == "true" || value == "yes") {
    policy.checking = HostKeyChecking::kYes;
    policy.source = "StrictHostKeyChecking yes in the ssh config";
  } else if (value == "ask") {
    policy.checking = HostKeyChecking::kYes;
    policy.source = "StrictHostKeyChecking ask in the ssh config (taken as yes: hvrun cannot ask)";
  } else if (value == "accept-new") {
    policy.checking = HostKeyChecking::kAcceptNew;
    policy.source = "StrictHostKeyChecking accept-new in the ssh config";
  } else if (value == "false" || value == "no" || value == "off") {
    policy.checking = HostKeyChecking::kNo;
    policy.source = "StrictHostKeyChecking no in the ssh config";
  } else {
    throw UsageError(host + ": StrictHostKeyChecking '" + value +
                     "' in the ssh config is not one hvrun knows; use yes, accept-new or no (see ssh -G " + host + ")");
  }
  if (config.user_known_hosts.empty()) {
    policy.user_files = {ssh_dir + "/known_hosts"};
  } else {
    for (const std::string& file : known_hosts_listed(config.user_known_hosts)) policy.user_files.push_back(tilde_in_known_hosts(file, ssh_dir));
  }
  for (const std::string& file : known_hosts_listed(config.global_known_hosts)) policy.global_files.push_back(tilde_in_known_hosts(file, ssh_dir));
  return policy;
}

std::string openssh_options(const HostKeyPolicy& policy) {
  const char* checking = policy.checking == HostKeyChecking::kYes         ? "yes"
                         : policy.checking == HostKeyChecking::kAcceptNew ? "accept-new"
                                                                          : "no";
  const auto list = [](const std::vector<std::string>& files) { return files.empty() ? std::string("none") : known_hosts_joined(files, " ", " "); };
  return std::string("-o StrictHostKeyChecking=") + checking + " -o " +
         shell_quote("UserKnownHostsFile=" + list(policy.user_files)) + " -o " +
         shell_quote("GlobalKnownHostsFile=" + list(policy.global_files));
}

}  // namespace hvrun

#include "launcher/ranks/user_env.hpp"

#include "common/error.hpp"
#include "launcher/nic/nic_filter.hpp"

namespace hvrun {

std::map<std::string, std::string> user_variables(const EnvFlags& flags,
                                                  const std::map<std::string, std::string>& launcher_env) {
  std::map<std::string, std::string> user;
  for (const auto& [name, value] : flags) {
    if (value) {
      user[name] = *value;
    } else if (const auto it = launcher_env.find(name); it != launcher_env.end()) {
      user[name] = it->second;
    }
  }
  return user;
}

void apply_user_variables(std::map<std::string, std::string>& rank_env,
                          const std::map<std::string, std::string>& user) {
  for (const auto& [name, value] : user) rank_env[name] = value;
}

namespace {

// The variables of the rank contract whose value names a NIC, and how to read it as a NicFilter:
// NCCL's own list syntax, or one exact name.
struct NicVariable {
  const char* name;
  bool nccl_syntax;
};
constexpr NicVariable kNicVariables[] = {
    {"NCCL_SOCKET_IFNAME", true},
    {"GLOO_SOCKET_IFNAME", false},
    {"HOROVOD_GLOO_IFACE", false},
    {"HVRUN_IFACE", false},
};

std::string usable_names(const HostSelection& s) {
  std::string names;
  for (const NicVerdict& v : s.nics)
    if (v.usable) names += (names.empty() ? "" : ", ") + v.iface;
  return names.empty() ? "none" : names;
}

}  // namespace

std::string user_nic_contradictions(const std::map<std::string, std::string>& user,
                                    const std::vector<std::string>& hosts,
                                    const std::vector<HostSelection>& selections) {
  std::string line;
  for (const NicVariable& var : kNicVariables) {
    const auto it = user.find(var.name);
    if (it == user.end()) continue;
    std::optional<NicFilter> filter;
    try {
      filter = NicFilter::parse({var.nccl_syntax ? it->second : "=" + it->second});
    } catch (const UsageError&) {
      // Not a NIC list hvrun can read (NCCL may still); nothing to compare with the probes.
      continue;
    }
    std::string where;
    for (std::size_t h = 0; h < hosts.size() && h < selections.size(); ++h) {
      bool matches = false;
      for (const NicVerdict& v : selections[h].nics) {
        InterfaceInfo nic;
        nic.name = v.iface;
        matches = matches || (v.usable && filter->allows(nic));
      }
      if (!matches) where += (where.empty() ? "" : ", ") + hosts[h] + " (usable there: " + usable_names(selections[h]) + ")";
    }
    if (where.empty()) continue;
    line += (line.empty() ? "" : "; ") + std::string("-x ") + var.name + "=" + it->second +
            " matches no usable NIC on " + where;
  }
  if (!line.empty()) line += "; honoured as given, ranks there may fail to connect";
  return line;
}

}  // namespace hvrun

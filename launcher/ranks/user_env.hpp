#pragma once
// The variables the user sets with -x, and the rule that they win: a rank's environment is hvrun's
// own environment, overridden by the rank contract, overridden by -x (README, "The rank environment").
// A -x that names NICs (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, ...) is honoured as given even when
// the probes found it unusable on some host; hvrun only says so.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

using EnvFlags = std::vector<std::pair<std::string, std::optional<std::string>>>;  // LaunchOptions::env

// The -x variables with their values: VAR=VALUE as given, a bare VAR with the value it has in
// `launcher_env` (left out when it has none there). A later -x of the same name wins.
std::map<std::string, std::string> user_variables(const EnvFlags& flags,
                                                  const std::map<std::string, std::string>& launcher_env);

// Overwrites `rank_env` (the rank contract) with every user variable.
void apply_user_variables(std::map<std::string, std::string>& rank_env,
                          const std::map<std::string, std::string>& user);

// One line when a user variable that names NICs matches no usable NIC of some host (by the probes):
// "-x NCCL_SOCKET_IFNAME=enp matches no usable NIC on b (usable there: eth1); honoured as given, ranks
// there may fail to connect"; "" when every host has one. `hosts` and `selections` are parallel.
std::string user_nic_contradictions(const std::map<std::string, std::string>& user,
                                    const std::vector<std::string>& hosts,
                                    const std::vector<HostSelection>& selections);

}  // namespace hvrun

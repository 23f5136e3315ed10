// The user's -x wins over the rank contract, and a -x naming NICs the probes found unusable is
// reported in one line but honoured.
#include <catch2/catch.hpp>

#include "launcher/ranks/user_env.hpp"

using Env = std::map<std::string, std::string>;

namespace {

hvrun::HostSelection usable(std::vector<std::string> good, std::vector<std::string> bad = {}) {
  hvrun::HostSelection s;
  for (const auto& n : good) {
    hvrun::NicVerdict v;
    v.iface = n;
    v.usable = true;
    s.nics.push_back(v);
  }
  for (const auto& n : bad) {
    hvrun::NicVerdict v;
    v.iface = n;
    s.nics.push_back(v);
  }
  return s;
}

}  // namespace

TEST_CASE("user variables: VAR=VALUE as given, bare VAR from hvrun's environment, the last one wins", "[user_env]") {
  const hvrun::EnvFlags flags{{"MASTER_PORT", "29500"}, {"HOME", std::nullopt}, {"MISSING", std::nullopt},
                              {"A", "1"}, {"A", "2"}, {"EMPTY", ""}};
  const Env launcher{{"HOME", "/root"}, {"PATH", "/bin"}};
  CHECK(hvrun::user_variables(flags, launcher) == Env{{"MASTER_PORT", "29500"}, {"HOME", "/root"}, {"A", "2"}, {"EMPTY", ""}});
}

TEST_CASE("user variables override the rank contract, nothing else changes", "[user_env]") {
  Env rank{{"MASTER_PORT", "41000"}, {"NCCL_SOCKET_IFNAME", "=eth1"}, {"RANK", "3"}};
  hvrun::apply_user_variables(rank, {{"MASTER_PORT", "29500"}, {"NCCL_SOCKET_IFNAME", "enp"}, {"EXTRA", "x"}});
  CHECK(rank == Env{{"MASTER_PORT", "29500"}, {"NCCL_SOCKET_IFNAME", "enp"}, {"RANK", "3"}, {"EXTRA", "x"}});
}

TEST_CASE("a -x naming NICs: silent when every host has a usable match, one line naming the others", "[user_env]") {
  const std::vector<std::string> hosts{"a", "b", "c"};
  const std::vector<hvrun::HostSelection> sel{usable({"enp6s0", "docker0"}), usable({"enp5s0"}, {"eth9"}),
                                              usable({"eth1"}, {"enp7s0"})};
  CHECK(hvrun::user_nic_contradictions({{"NCCL_SOCKET_IFNAME", "enp,eth"}}, hosts, sel).empty());
  CHECK(hvrun::user_nic_contradictions({{"NCCL_SOCKET_IFNAME", "^docker"}}, hosts, sel).empty());
  CHECK(hvrun::user_nic_contradictions({{"MASTER_PORT", "29500"}}, hosts, sel).empty());

  // enp7s0 exists on c but is not usable there: that host is named with what is usable.
  const std::string line = hvrun::user_nic_contradictions({{"NCCL_SOCKET_IFNAME", "enp"}}, hosts, sel);
  CHECK(line == "-x NCCL_SOCKET_IFNAME=enp matches no usable NIC on c (usable there: eth1); honoured as given, "
                "ranks there may fail to connect");
  // GLOO_SOCKET_IFNAME is one exact name, not a prefix.
  const std::string gloo = hvrun::user_nic_contradictions({{"GLOO_SOCKET_IFNAME", "enp"}}, hosts, sel);
  CHECK(gloo.find("on a (usable there: enp6s0, docker0), b (usable there: enp5s0), c (usable there: eth1)") !=
        std::string::npos);
  CHECK(gloo.find('\n') == std::string::npos);
  // A value hvrun cannot read as a NIC list is NCCL's business; no claim is made about it.
  CHECK(hvrun::user_nic_contradictions({{"NCCL_SOCKET_IFNAME", ","}}, hosts, sel).empty());
}

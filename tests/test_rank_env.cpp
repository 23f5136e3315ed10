#include <catch2/catch.hpp>

#include <unistd.h>

#include <map>
#include <set>
#include <string>

#include "common/error.hpp"
#include "launcher/ranks/rank_env.hpp"

using Env = std::map<std::string, std::string>;

namespace {

hvrun::JobNetwork two_hosts() {
  hvrun::JobNetwork net;
  net.hosts = {{"node-a", "enp6s0", "10.0.0.1"}, {"node-b", "enp5s0", "10.0.0.2"}};
  net.master_addr = "10.0.0.1";
  net.master_port = 29500;
  net.restarts = {0, 0, "run-1"};
  return net;
}

std::set<std::string> keys(const Env& env) {
  std::set<std::string> out;
  for (const auto& [k, v] : env) out.insert(k);
  return out;
}

const std::set<std::string> kContractKeys{
    "HVRUN_RANK",         "HVRUN_SIZE",         "HVRUN_LOCAL_RANK",   "HVRUN_LOCAL_SIZE",  "HVRUN_CROSS_RANK",
    "HVRUN_CROSS_SIZE",   "HVRUN_HOSTNAME",     "HVRUN_IFACE",        "HVRUN_ADDR",        "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME", "HOROVOD_RANK",       "HOROVOD_SIZE",       "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME",   "HOROVOD_GLOO_IFACE", "RANK",
    "WORLD_SIZE",         "LOCAL_RANK",         "LOCAL_WORLD_SIZE",   "GROUP_RANK",        "MASTER_ADDR",
    "MASTER_PORT",        "HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS", "PYTHONUNBUFFERED",
    "PYTHONFAULTHANDLER", "GROUP_WORLD_SIZE",   "ROLE_RANK",          "ROLE_WORLD_SIZE",   "ROLE_NAME",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID"};

}  // namespace

TEST_CASE("rank environment: exact keys and values before the store exists", "[rank_env]") {
  // a:2, b:1 → rank 2 is b's local rank 0
  const hvrun::RankPlan plan({{"a", 2}, {"b", 1}}, 0, false);
  const Env env = hvrun::rank_environment(plan.rank(2), two_hosts());
  CHECK(keys(env) == kContractKeys);
  const Env expected{
      {"HVRUN_RANK", "2"},
      {"HVRUN_SIZE", "3"},
      {"HVRUN_LOCAL_RANK", "0"},
      {"HVRUN_LOCAL_SIZE", "1"},
      {"HVRUN_CROSS_RANK", "1"},
      {"HVRUN_CROSS_SIZE", "2"},
      {"HVRUN_HOSTNAME", "node-b"},
      {"HVRUN_IFACE", "enp5s0"},
      {"HVRUN_ADDR", "10.0.0.2"},
      {"NCCL_SOCKET_IFNAME", "=enp5s0"},
      {"GLOO_SOCKET_IFNAME", "enp5s0"},
      {"HOROVOD_RANK", "2"},
      {"HOROVOD_SIZE", "3"},
      {"HOROVOD_LOCAL_RANK", "0"},
      {"HOROVOD_LOCAL_SIZE", "1"},
      {"HOROVOD_CROSS_RANK", "1"},
      {"HOROVOD_CROSS_SIZE", "2"},
      {"HOROVOD_HOSTNAME", "node-b"},
      {"HOROVOD_GLOO_IFACE", "enp5s0"},
      {"HOROVOD_CONTROLLER", "gloo"},
      {"HOROVOD_CPU_OPERATIONS", "gloo"},
      {"PYTHONUNBUFFERED", "1"},
      {"PYTHONFAULTHANDLER", "1"},
      {"RANK", "2"},
      {"WORLD_SIZE", "3"},
      {"LOCAL_RANK", "0"},
      {"LOCAL_WORLD_SIZE", "1"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "2"},
      {"ROLE_WORLD_SIZE", "3"},
      {"ROLE_NAME", "default"},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "run-1"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
  };
  CHECK(env == expected);
}

TEST_CASE("rank environment: store variables once the store exists", "[rank_env]") {
  const hvrun::RankPlan plan({{"a", 2}, {"b", 1}}, 0, false);
  auto net = two_hosts();
  net.store_addr = "10.0.0.1";
  net.store_port = 41000;
  net.store_token = "s3cr3t";
  const Env env = hvrun::rank_environment(plan.rank(1), net);
  auto expected_keys = kContractKeys;
  expected_keys.insert({"HVRUN_STORE_ADDR", "HVRUN_STORE_PORT", "HVRUN_STORE_TOKEN"});
  CHECK(keys(env) == expected_keys);
  CHECK(env.at("HVRUN_STORE_ADDR") == "10.0.0.1");
  CHECK(env.at("HVRUN_STORE_PORT") == "41000");
  CHECK(env.at("HVRUN_STORE_TOKEN") == "s3cr3t");
  CHECK(env.at("HVRUN_LOCAL_RANK") == "1");
  CHECK(env.at("HVRUN_CROSS_SIZE") == "1");  // only a has a local rank 1
  CHECK(env.at("HVRUN_HOSTNAME") == "node-a");
  CHECK(env.at("NCCL_SOCKET_IFNAME") == "=enp6s0");
}

TEST_CASE("rank environment: Horovod's Gloo rendezvous once it is served", "[rank_env]") {
  const hvrun::RankPlan plan({{"a", 2}, {"b", 1}}, 0, false);
  auto net = two_hosts();
  net.horovod_rendezvous_addr = "10.0.0.1";
  net.horovod_rendezvous_port = 41001;
  const Env env = hvrun::rank_environment(plan.rank(2), net);
  auto expected_keys = kContractKeys;
  expected_keys.insert({"HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT"});
  CHECK(keys(env) == expected_keys);
  // Every rank, on every host, reaches the one rendezvous on rank 0's host.
  CHECK(env.at("HOROVOD_GLOO_RENDEZVOUS_ADDR") == "10.0.0.1");
  CHECK(env.at("HOROVOD_GLOO_RENDEZVOUS_PORT") == "41001");
  CHECK(env.at("HOROVOD_GLOO_IFACE") == "enp5s0");
  CHECK(env.at("HOROVOD_HOSTNAME") == "node-b");
}

TEST_CASE("GROUP_RANK is the node index among used hosts, not the cross rank", "[rank_env]") {
  // a:2, b:1, c:2 → rank 4 is c's local rank 1: cross rank 1 of 2, but node 2
  const hvrun::RankPlan plan({{"a", 2}, {"b", 1}, {"c", 2}}, 0, false);
  hvrun::JobNetwork net;
  net.hosts = {{"a", "eth0", "10.0.0.1"}, {"b", "eth0", "10.0.0.2"}, {"c", "eth1", "10.0.1.3"}};
  const Env env = hvrun::rank_environment(plan.rank(4), net);
  CHECK(env.at("GROUP_RANK") == "2");
  CHECK(env.at("HOROVOD_CROSS_RANK") == "1");
  CHECK(env.at("HOROVOD_CROSS_SIZE") == "2");
  CHECK(env.at("GLOO_SOCKET_IFNAME") == "eth1");
}

TEST_CASE("rank environment needs network facts for the rank's host", "[rank_env]") {
  const hvrun::RankPlan plan({{"a", 1}, {"b", 1}, {"c", 1}}, 0, false);
  CHECK_THROWS_AS(hvrun::rank_environment(plan.rank(2), two_hosts()), hvrun::Error);
}

TEST_CASE("torchrun's whole environment: group, role, run, restarts; GROUP_WORLD_SIZE counts hosts with ranks",
          "[rank_env][torchrun]") {
  // a:2, b:2, c:2 with 4 ranks: c runs none, so the group is a and b.
  const hvrun::RankPlan plan({{"a", 2}, {"b", 2}, {"c", 2}}, 4, false);
  hvrun::JobNetwork net;
  net.hosts = {{"a", "eth0", "10.0.0.1"}, {"b", "eth0", "10.0.0.2"}, {"c", "eth0", "10.0.0.3"}};
  net.restarts = {1, 3, "job7"};
  net.role = "trainer";
  for (int r = 0; r < 4; ++r) {
    const Env env = hvrun::rank_environment(plan.rank(r), net);
    INFO("rank " << r);
    CHECK(env.at("GROUP_RANK") == std::to_string(r / 2));
    CHECK(env.at("GROUP_WORLD_SIZE") == "2");
    CHECK(env.at("ROLE_RANK") == std::to_string(r));
    CHECK(env.at("ROLE_WORLD_SIZE") == "4");
    CHECK(env.at("ROLE_NAME") == "trainer");
    CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "1");
    CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "3");
    CHECK(env.at("TORCHELASTIC_RUN_ID") == "job7");
    CHECK(env.count("TORCHELASTIC_USE_AGENT_STORE") == 0);
    CHECK(env.count("OMP_NUM_THREADS") == 0);  // the ranks' environment was not said to lack it
  }
}

TEST_CASE("OMP_NUM_THREADS=1 as torchrun sets it: ranks sharing a host, when nothing sets it", "[rank_env][torchrun]") {
  const hvrun::RankPlan plan({{"a", 2}, {"b", 1}}, 0, false);
  auto net = two_hosts();
  CHECK(hvrun::omp_threads_notice(plan, net).empty());
  net.omp_threads_unset = true;
  CHECK(hvrun::rank_environment(plan.rank(0), net).at("OMP_NUM_THREADS") == "1");
  CHECK(hvrun::rank_environment(plan.rank(1), net).at("OMP_NUM_THREADS") == "1");
  CHECK(hvrun::rank_environment(plan.rank(2), net).count("OMP_NUM_THREADS") == 0);  // alone on b
  const std::string notice = hvrun::omp_threads_notice(plan, net);
  CHECK_THAT(notice, Catch::StartsWith("OMP_NUM_THREADS=1 for each rank on a host that runs more than one"));
  CHECK(notice.find('\n') == std::string::npos);
  CHECK(hvrun::omp_threads_notice(hvrun::RankPlan({{"a", 1}, {"b", 1}}, 0, false), net).empty());
}

TEST_CASE("TORCHELASTIC_RUN_ID: --rdzv-id, else hvrun-HOST-PID", "[rank_env][torchrun]") {
  hvrun::LaunchOptions o;
  CHECK_THAT(hvrun::job_run_id(o), Catch::StartsWith("hvrun-") && Catch::EndsWith("-" + std::to_string(::getpid())));
  o.run_id = "job7";
  CHECK(hvrun::job_run_id(o) == "job7");
}

// The agent start-up (launcher/start/agent_startup.hpp) without starting agents: the job's hosts from the
// plan, each agent's hello, when every agent is up, and two entries that are one machine.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "hvrun/version.hpp"
#include "launcher/start/agent_startup.hpp"

using hvrun::AgentStartup;
using hvrun::JobHost;
using namespace std::chrono_literals;

namespace {

hvrun::HelloMsg hello(const std::string& version, const std::string& stack) {
  hvrun::HelloMsg m;
  m.version = version;
  m.hostname = "h";
  m.pid = 7;
  m.network_stack = stack;
  return m;
}

}  // namespace

TEST_CASE("agent startup: job hosts, hellos, all up, one machine twice", "[agent_startup]") {
  // -np 3 over three hosts of 2 slots: the third runs no rank and is no job host.
  const hvrun::RankPlan plan({{"localhost", 2}, {"other.invalid", 2}, {"spare.invalid", 2}}, 3, false);
  std::vector<JobHost> hosts = hvrun::job_hosts(plan, 2000ms);
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[0].name == "localhost");
  CHECK(hosts[0].is_local);
  CHECK(hosts[1].plan_index == 1);
  CHECK_FALSE(hosts[1].is_local);

  boost::asio::io_context io;
  hvrun::LaunchOptions options;
  AgentStartup startup(io, options, plan, hosts, std::chrono::steady_clock::now(),
                       AgentStartup::Hooks{
                           .starting = [] { return true; }, .attach = {}, .turn = {}, .failed = {}, .connected = {}});
  CHECK_FALSE(startup.all_up());
  hosts[0].life.attach();  // what start() does through the attach hook
  CHECK_THROWS_WITH(startup.hello(0, hello("0.0.0-other", "ns"), "agent on localhost"),
                    std::string("agent on localhost is version 0.0.0-other, hvrun is ") + hvrun::kVersion +
                        "; install the same hvrun version on every host");
  startup.hello(0, hello(hvrun::kVersion, "ns"), "agent on localhost");
  CHECK_THROWS_WITH(startup.hello(0, hello(hvrun::kVersion, "ns"), "agent on localhost"),
                    "agent on localhost: a second hello");
  hvrun::accept_ready(hosts[0], hvrun::ReadyMsg{0, "", ""}, false, false, "agent on localhost");
  CHECK_FALSE(startup.all_up());
  // A host whose start failed counts as settled (--check-only reports it).
  hosts[1].life.fail_start();
  hosts[1].connect_error = "ssh: refused";
  CHECK(startup.all_up());
  hosts[1].connect_error.reset();
  hosts[1].life = hvrun::HostLife{};  // the same host started again, for the rest
  hosts[1].life.attach();
  startup.hello(1, hello(hvrun::kVersion, "ns"), "agent on other.invalid");
  hvrun::accept_ready(hosts[1], hvrun::ReadyMsg{0, "", ""}, false, false, "agent on other.invalid");
  CHECK(startup.all_up());
  // Both agents report one network stack: one machine listed twice.
  const auto twin = startup.same_host();
  REQUIRE(twin);
  CHECK(twin->find("'localhost' and 'other.invalid'") != std::string::npos);
  startup.clear_status();  // no status line without start(): nothing to clear
  startup.stop();
}

TEST_CASE("agent startup: an agent of the same release speaking other control messages is refused by name",
          "[agent_startup]") {
  const hvrun::RankPlan plan({{"localhost", 1}}, 1, false);
  std::vector<JobHost> hosts = hvrun::job_hosts(plan, 2000ms);
  boost::asio::io_context io;
  hvrun::LaunchOptions options;
  AgentStartup startup(io, options, plan, hosts, std::chrono::steady_clock::now(),
                       AgentStartup::Hooks{
                           .starting = [] { return true; }, .attach = {}, .turn = {}, .failed = {}, .connected = {}});
  hosts[0].life.attach();
  // An earlier agent's hello: no control_version (version 1).
  auto old = std::get<hvrun::HelloMsg>(hvrun::decode_control(
      std::string(R"({"type":"hello","version":")") + hvrun::kVersion +
          R"(","hostname":"h","pid":7,"free_port":1,"probe_port":2,"interfaces":[],"ssh_client_address":"",)"
          R"("ssh_server_address":""})",
      "agent on localhost"));
  CHECK_THROWS_WITH(startup.hello(0, old, "agent on localhost"),
                    std::string("agent on localhost is version ") + hvrun::kVersion + " (control protocol 1), hvrun is " +
                        hvrun::kVersion + " (control protocol " + std::to_string(hvrun::kControlVersion) +
                        "); install the same hvrun version on every host");
  CHECK_FALSE(hosts[0].hello);
  startup.hello(0, hello(hvrun::kVersion, "ns"), "agent on localhost");
  CHECK(hosts[0].hello);
}

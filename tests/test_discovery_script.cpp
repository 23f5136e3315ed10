// launcher/elastic/discovery_script.hpp: --host-discovery-script runs, their failures worded, a hanging
// script stopped at its deadline with everything it started, the loop's period and prompt stop, and each
// host's locality resolved off the job's thread.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "launcher/elastic/discovery_script.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 && !hvrun::test::is_zombie_or_gone(pid); }

}  // namespace

TEST_CASE("a discovery script's run: its hosts, or why not in one line", "[unit][elastic]") {
  auto ok = run_discovery_script("printf 'lab1:2\\nlab2\\n'", 4, 10s);
  CHECK(ok.error.empty());
  CHECK(ok.hosts == std::vector<HostSlots>{{"lab1", 2}, {"lab2", 4}});
  CHECK(run_discovery_script("true", std::nullopt, 10s).hosts.empty());

  CHECK(run_discovery_script("echo lab1:2; echo 'no such file' >&2; echo 'cannot reach the scheduler' >&2; exit 3",
                             std::nullopt, 10s)
            .error == "--host-discovery-script echo lab1:2; echo 'no such file' >&2; echo 'cannot reach the "
                      "scheduler' >&2; exit 3 exited with code 3; its stderr: no such file | cannot reach the scheduler");
  CHECK(run_discovery_script("echo lab1", std::nullopt, 10s).error ==
        "--host-discovery-script echo lab1 printed 'lab1': a host without slots, and --slots-per-host is not given; "
        "give --slots-per-host N or print lab1:N; print one HOST or HOST:SLOTS per line");
  CHECK_THAT(run_discovery_script("kill -TERM $$", 1, 10s).error, Catch::Contains("was killed by SIGTERM"));
}

TEST_CASE("a discovery script that hangs is stopped at its deadline, with what it started", "[unit][elastic]") {
  const fs::path pids = fs::temp_directory_path() / ("hvrun-discovery-" + std::to_string(::getpid()));
  const auto t0 = Clock::now();
  auto run = run_discovery_script("sleep 60 & echo $! > " + pids.string() + "; echo $$ >> " + pids.string() + "; wait",
                                  1, 500ms);
  CHECK(Clock::now() - t0 < 5s);
  CHECK(run.error == "--host-discovery-script sleep 60 & echo $! > " + pids.string() + "; echo $$ >> " +
                         pids.string() + "; wait did not finish within 0.5 s; it must print the hosts and exit");
  std::ifstream in(pids);
  pid_t sleeper = 0, shell = 0;
  in >> sleeper >> shell;
  fs::remove(pids);
  REQUIRE(sleeper > 0);
  const auto deadline = Clock::now() + 5s;
  while ((alive(sleeper) || alive(shell)) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  CHECK_FALSE(alive(sleeper));
  CHECK_FALSE(alive(shell));
}

TEST_CASE("the discovery loop runs the script again a period after each run and stops at once", "[unit][elastic]") {
  std::atomic<int> runs{0};
  std::atomic<int> hosts{0};
  {
    DiscoveryLoop loop("echo lab1:1", std::nullopt, 50ms, 10s, [&](DiscoveryRun r) {
      hosts = static_cast<int>(r.hosts.size());
      ++runs;
    });
    const auto deadline = Clock::now() + 10s;
    while (runs < 3 && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  }
  CHECK(runs >= 3);
  CHECK(hosts == 1);
  const int after = runs;
  std::this_thread::sleep_for(200ms);
  CHECK(runs == after);  // nothing runs once the loop is gone

  // Each host's locality comes with the run, resolved on the loop's thread (once per name).
  {
    std::mutex m;
    std::map<std::string, bool> local;
    DiscoveryLoop loop("printf 'localhost:2\\n192.0.2.1:1\\n127.0.0.1:1\\n'", std::nullopt, 50ms, 10s, [&](DiscoveryRun r) {
      std::lock_guard lock(m);
      local = r.local;
    });
    const auto deadline = Clock::now() + 10s;
    for (;;) {
      {
        std::lock_guard lock(m);
        if (!local.empty() || Clock::now() >= deadline) break;
      }
      std::this_thread::sleep_for(10ms);
    }
    std::lock_guard lock(m);
    CHECK(local == std::map<std::string, bool>{{"localhost", true}, {"192.0.2.1", false}, {"127.0.0.1", true}});
  }

  // A run in progress is killed, not waited for.
  const auto t0 = Clock::now();
  {
    DiscoveryLoop hung("sleep 60", 1, 50ms, 60s, [](DiscoveryRun) {});
    std::this_thread::sleep_for(200ms);
  }
  CHECK(Clock::now() - t0 < 5s);
}

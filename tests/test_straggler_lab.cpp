// Issue 40 on the lab, with Debian's python3-torch (torch DDP over Gloo, 4 MiB of gradients a step, the
// program unchanged): a host whose processes get a quarter of a CPU (a cpu cgroup the test makes around
// that host's sshd, so the agent and the rank it starts are in it) is named while the job runs, with the
// quota; a uniform job names nobody, and --events and --rank-table record it whole.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/child_process.hpp"
#include "tests/support/file_text.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/torch_python.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

bool write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

// A cpu cgroup limited to `cpus` CPUs holding process `pid` (and what it forks from now on): cgroup v1's
// cpu controller, else v2's cpu.max. The destructor moves its processes back to the root group and
// removes it, whatever the test did.
class CpuQuota {
 public:
  static std::optional<std::string> unavailable() {
    if (fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")) return std::nullopt;
    if (!fs::exists("/sys/fs/cgroup/cgroup.controllers")) return "no cgroup v1 cpu controller and no cgroup v2";
    if (slurp("/sys/fs/cgroup/cgroup.controllers").find("cpu") == std::string::npos)
      return "cgroup v2 without the cpu controller";
    return std::nullopt;
  }

  CpuQuota(const std::string& name, pid_t pid, double cpus) {
    const bool v1 = fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    root_ = v1 ? "/sys/fs/cgroup/cpu" : "/sys/fs/cgroup";
    if (!v1 && slurp(root_ / "cgroup.subtree_control").find("cpu") == std::string::npos)
      REQUIRE(write_file(root_ / "cgroup.subtree_control", "+cpu"));
    dir_ = root_ / name;
    fs::create_directory(dir_);
    const int quota = static_cast<int>(cpus * 100000);
    if (v1) {
      REQUIRE(write_file(dir_ / "cpu.cfs_period_us", "100000"));
      REQUIRE(write_file(dir_ / "cpu.cfs_quota_us", std::to_string(quota)));
    } else {
      REQUIRE(write_file(dir_ / "cpu.max", std::to_string(quota) + " 100000"));
    }
    REQUIRE(write_file(dir_ / "cgroup.procs", std::to_string(pid)));
  }
  ~CpuQuota() {
    for (int attempt = 0; attempt < 50; ++attempt) {
      std::ifstream procs(dir_ / "cgroup.procs");
      for (std::string pid; std::getline(procs, pid);) write_file(root_ / "cgroup.procs", pid);
      std::error_code ec;
      if (fs::remove(dir_, ec) || !fs::exists(dir_)) return;
      std::this_thread::sleep_for(100ms);
    }
  }
  CpuQuota(const CpuQuota&) = delete;
  CpuQuota& operator=(const CpuQuota&) = delete;

 private:
  fs::path root_, dir_;
};


std::vector<nlohmann::json> events_of(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("straggler on the lab: a host held to a quarter of a CPU is named as starved while the job runs, a uniform "
          "job names nobody, and --events and --rank-table record it",
          "[lab][straggler]") {
  HVRUN_SKIP_WITHOUT_TORCH_LAB();
  if (auto why = CpuQuota::unavailable()) {
    WARN("skipped: " << *why);
    return;
  }
  Lab lab(3);
  TempHome home;
  SharedDir shared("straggler");
  const std::string h0 = lab.host(0), h1 = lab.host(1), h2 = lab.host(2);
  const std::string marker = unique_marker();
  // The same CPU work on every rank (~50 ms a step on a free core: more than a quarter of a CPU, so the
  // quota bites), then an allreduce of 4 MiB.
  const std::string program = source_dir() + "/tests/faults/ddp_steps.py";
  const fs::path events = shared.dir / "events.jsonl";
  auto job = [&](const std::string& seconds, std::vector<std::string> extra) {
    std::vector<std::string> args = {"-np", "3", "-H", h0 + ":1," + h1 + ":1," + h2 + ":1", "-x", "OMP_NUM_THREADS=1",
                                     "-x", marker};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {kTorchPython, program, "0", "400000", seconds});
    return hvrun_on(lab, home, args);
  };
  {
    INFO("lab host 1's sshd, and so the agent and rank 1 it starts, in a cgroup of a quarter of a CPU");
    const pid_t sshd = std::stoi(slurp(fs::path(lab.var("LAB_DIR")) / "h1" / "sshd.pid"));
    CpuQuota quota("hvrun-test-" + std::to_string(::getpid()), sshd, 0.25);
    const fs::path starved_events = shared.dir / "starved.jsonl";
    // 14 s: two windows of start-up (imports, the rendezvous), then three to name it, and a margin.
    const auto r = run(job("14", {"--events", starved_events.string()}), 240s);
    INFO(r.out << r.err);
    INFO(slurp(starved_events));
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "DDP done") == 3);
    // The quota itself ("may use 0.25 of a CPU") is not in the line here: `ip netns exec` gives each lab
    // host a /sys of its own, without the cgroup mounts (tests/test_rank_sampler.cpp reads a quota).
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 1 on " + h1 + " holds the job back") &&
                          Catch::Contains("it waited for a CPU"));
    bool named = false;
    for (const auto& l : events_of(starved_events))
      if (l["event"] == "straggler") {
        CHECK(l["rank"] == 1);
        CHECK(l["host"] == h1);
        CHECK(l["cause"] == "starved");
        named = true;
      }
    CHECK(named);
    CHECK_THAT(r.err, !Catch::Contains("rank 0 on " + h0 + " holds") && !Catch::Contains("rank 2 on " + h2 + " holds"));
  }
  {
    INFO("no quota: nobody named; --events has every rank's start, observations and exit, then the end");
    const auto r = run(job("6", {"--events", events.string(), "--rank-table"}), 240s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, !Catch::Contains("holds the job back"));
    for (const std::string& h : {h0, h1, h2}) {
      INFO("the ranks' table has " << h << "'s rank");
      CHECK(std::regex_search(r.err, std::regex("hvrun:   " + h + " +[0-2] +[0-9.]+ s +[0-9.]+ s +[0-9]+ % +[0-9]+ MiB +0\n")));
    }
    const auto lines = events_of(events);
    REQUIRE(!lines.empty());
    CHECK(lines.front()["event"] == "job_start");
    CHECK(lines.front()["np"] == 3);
    CHECK(lines.back()["event"] == "job_end");
    CHECK(lines.back()["exit_code"] == 0);
    std::set<std::string> observed_hosts;
    std::set<int> started, exited;
    for (const auto& l : lines) {
      if (l["event"] == "observation") observed_hosts.insert(l["host"].get<std::string>());
      if (l["event"] == "rank_start") started.insert(l["rank"].get<int>());
      if (l["event"] == "rank_exit") exited.insert(l["rank"].get<int>());
      CHECK(l["event"] != "straggler");
    }
    CHECK(observed_hosts == std::set<std::string>{h0, h1, h2});
    CHECK(started == std::set<int>{0, 1, 2});
    CHECK(exited == std::set<int>{0, 1, 2});
  }
  CHECK(wait_until_gone(marker, 2s).empty());
}

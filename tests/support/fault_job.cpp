#include "tests/support/fault_job.hpp"

#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "tests/support/build_paths.hpp"

namespace hvrun::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const long kMaxRssKib = build().sanitized ? 768 * 1024 : 64 * 1024;

std::chrono::milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

bool has_crash_text(const std::string& err) {
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '[' || line[0] == ' ') continue;
    for (const char* s : {"terminate called", "what()", "Segmentation fault", "Aborted", "core dumped"})
      if (line.find(s) != std::string::npos) return true;
  }
  return false;
}

std::vector<pid_t> rank_processes(const std::string& marker, int rank) {
  const auto with_rank = processes_with_marker("HVRUN_RANK=" + std::to_string(rank));
  std::vector<pid_t> out;
  for (const pid_t p : processes_with_marker(marker))
    if (std::find(with_rank.begin(), with_rank.end(), p) != with_rank.end()) out.push_back(p);
  return out;
}

MemoryCgroup::MemoryCgroup(long bytes) {
  const std::string name = "hvtest-oom-" + std::to_string(::getpid());
  const fs::path v2 = "/sys/fs/cgroup";
  std::ifstream controllers(v2 / "cgroup.controllers");
  std::string list((std::istreambuf_iterator<char>(controllers)), std::istreambuf_iterator<char>());
  if (list.find("memory") != std::string::npos) {
    std::ofstream(v2 / "cgroup.subtree_control") << "+memory";
    dir = v2 / name;
    fs::create_directory(dir);
    std::ofstream(dir / "memory.max") << bytes;
    std::ofstream(dir / "memory.swap.max") << 0;
    if (fs::exists(dir / "memory.max")) return;
  } else if (fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
    dir = fs::path("/sys/fs/cgroup/memory") / name;
    fs::create_directory(dir);
    std::ofstream(dir / "memory.limit_in_bytes") << bytes;
    std::ofstream(dir / "memory.swappiness") << 0;
    if (fs::exists(dir / "memory.limit_in_bytes")) return;
  }
  unavailable = "no memory cgroup controller to make a cgroup with a memory limit (v2 memory controller or v1 "
                "memory hierarchy)";
}

MemoryCgroup::~MemoryCgroup() {
  if (dir.empty()) return;
  for (int i = 0; i < 50 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(100ms);
}

bool MemoryCgroup::add(pid_t pid) const {
  std::ofstream procs(dir / "cgroup.procs");
  procs << pid << std::flush;
  return static_cast<bool>(procs);
}

FaultJob::FaultJob(const Lab& l, const TempHome& h)
    : lab(l), home(h), trigger(home.dir / ("trigger-" + std::to_string(::getpid()))) {
  fs::remove(trigger);
}

FaultJob::~FaultJob() { fs::remove(trigger); }

void FaultJob::start(const std::vector<std::string>& extra, const std::string& script, int ready) {
  std::vector<std::string> args{"--verbose", "--kill-grace", std::to_string(kGrace.count()), "-H",
                                lab.host(1) + ":2," + lab.host(2) + ":2", "-x", marker};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"sh", "-c", script});
  hvrun = std::make_unique<ChildProcess>(hvrun_on(lab, home, args));
  if (ready > 0 && !hvrun->wait_for_stdout("<stdout>:ready", ready, 60s)) {
    auto r = hvrun->wait(5s);
    FAIL("hvrun did not start its ranks (exit " << r.exit_code << "): " << r.out << r.err);
  }
  agents = agent_pids(hvrun->stderr_so_far());
  if (ready > 0) REQUIRE(agents.size() == 2);
}

void FaultJob::fire() {
  t0 = Clock::now();
  std::ofstream(trigger) << "go\n";
}

ChildResult FaultJob::finish(std::chrono::milliseconds limit) {
  ChildResult r = hvrun->wait(limit);
  const auto teardown = since(t0);
  for (const auto& [host, pid] : agent_pids(r.err)) agents.emplace(host, pid);
  UNSCOPED_INFO("hvrun said:\n" << r.err << "teardown " << teardown.count() << " ms, peak RSS " << r.max_rss_kib
                                << " KiB");
  CHECK(r.exit_code != -1);  // not killed by our deadline
  // hvrun ends only after every agent confirmed its ranks ended (or was cut off): nothing may be
  // left the moment it is gone, bar the kernel's own moment to reap a killed group.
  CHECK(wait_until_gone(marker, 500ms).empty());
  CHECK(agents_left(agents, 1s).empty());
  CHECK(r.max_rss_kib < kMaxRssKib);
  CHECK_FALSE(has_crash_text(r.err));
  last_teardown = teardown;
  return r;
}

void FaultJob::kill_hvrun() {
  mark();
  hvrun->signal(SIGKILL);
  auto r = hvrun->wait(10s);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(wait_until_gone(marker, kGrace + 1s).empty());
  CHECK(agents_left(agents, 1s).empty());
}

ChildResult FaultJob::cut_off(int i, std::chrono::milliseconds within) {
  mark();
  REQUIRE(lab.control({"cut", std::to_string(i)}) == 0);
  ChildResult r = hvrun->wait(30s);
  last_teardown = since(t0);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const auto deadline = Clock::now() + within;
  while (!lab.processes_on_host(i, marker).empty() && Clock::now() < deadline) std::this_thread::sleep_for(100ms);
  CHECK(lab.processes_on_host(i, marker).empty());
  CHECK(agents_left(agents, 2s).empty());
  lab.control({"uncut", std::to_string(i)});
  CHECK(wait_until_gone(marker, 1s).empty());
  return r;
}

}  // namespace hvrun::test

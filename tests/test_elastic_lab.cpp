// Horovod elastic under hvrun (--host-discovery-script): the real Horovod 0.28.1 elastic example
// (../shared/horovod/examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py, unchanged) on lab
// hosts while the discovery script's output changes: a host added joins, a host whose ranks are killed
// is blacklisted, a host cut off is lost, and the job ends 0 each time with the program's own world size
// following the changes. The same example under the real horovodrun on a uniform lab is the reference.
// Two cases need no lab and no Horovod: a failing discovery script, a line without slots.
//
// How the test sees Horovod's world size: Horovod's C++ core logs, on every reset of a rank that was
// already running (gloo_context.cc:207, LOG(DEBUG): HOROVOD_LOG_LEVEL=debug is needed, "info" does not
// show it), e.g. as seen under the real horovodrun on localhost (localhost:2, then localhost:3, then
// localhost:2 in the discovery script's output):
//   [1]<stdout>:[2026-12-03 01:13:52.480701: D /tmp/hvd/src/horovod/common/gloo/gloo_context.cc:207] elastic mode
//     reinitialization complete, updated rank: 1 -> 1 size: 2 -> 3 local_rank: 1 -> 1 local_size: 2 -> 3
//     cross_rank: 0 -> 0 cross_size: 1 -> 1                                       (one line, wrapped here)
//   [0]<stdout>:[...] elastic mode reinitialization complete, updated rank: 0 -> 0 size: 3 -> 2 local_rank: 0 -> 0 ...
// and on lab hosts (h1:1,h2:1, then +h3:1, then h2's rank killed by SIGKILL):
//   [0]<stdout>:[...] ... updated rank: 0 -> 0 size: 2 -> 3 local_rank: 0 -> 0 local_size: 1 -> 1 cross_rank: 0 -> 0
//     cross_size: 2 -> 3
//   [2]<stdout>:[...] ... updated rank: 2 -> 1 size: 3 -> 2 local_rank: 0 -> 0 local_size: 1 -> 1 cross_rank: 2 -> 1
//     cross_size: 3 -> 2
// A rank that starts fresh (the one on the added host) prints no such line, only "Horovod initialized"; the
// first world has none either. So the sizes read from these lines are 2, 3, 2 for add-then-kill and 3, 2 for
// a host cut off. Horovod's D and I lines come on the ranks' stdout, its E lines on stderr; both are read.
// One iteration of `--model shufflenet_v2_x0_5 --batch-size 4 --num-batches-per-iter 1` took 0.4-0.5 s with
// 2 ranks on this 2-core machine idle, 0.5-1.5 s with 2 or 3 ranks when it was loaded (load average 8), about
// 2 s with 3 lab ranks under that load (the reference case: 3 min 8 s in all); a reset to add a host took about
// 5 s (the new rank's `import torch` included), a reset after a killed rank under 1 s.
#include <catch2/catch.hpp>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/sshd_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/horovod_site.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// ---- hvrun's elastic lines on stderr, in one place (the launcher's wording may still shift) ----------------
// "elastic: started <N> ranks on <hosts>"
std::string started_line(int ranks) { return "elastic: started " + std::to_string(ranks) + " ranks on "; }
// "<host> joined: <N> ranks now" (N: the job's ranks once the host is in)
std::string joined_pattern(const std::string& host_re) { return host_re + R"( joined: (\d+) ranks now)"; }
// "<host> lost (<why>)"
std::string lost_pattern(const std::string& host_re) { return host_re + R"( lost \()"; }
// "<host> blacklisted for ..." (after a worker of it failed, or it was lost)
std::string blacklisted_pattern(const std::string& host_re) { return host_re + " blacklisted for "; }
// "<host> is left out of the elastic job: <why>; the job goes on without it"
std::string left_out_line(const std::string& host) { return host + " is left out of the elastic job: "; }
// The discovery script's failures (tests 3 and 4).
std::string script_exit_code(int code) { return "exited with code " + std::to_string(code); }
const char* const kSlotsPerHost = "--slots-per-host";
// ---- the program's and Horovod's lines ------------------------------------------------------------------------
const char* const kIter = "<stdout>:Iter #";  // rank 0's "Iter #K: X img/sec per CPU"
// Rank 0's last line, as the example prints it. Not anchored at the line's start: Horovod's own C++ log
// (HOROVOD_LOG_LEVEL=debug here) writes to the same stdout as the program's print, and a log line's
// "[time: D " can come just before it on one line (seen in CI).
std::string total_line(int size) { return "Total img/sec on " + std::to_string(size) + " CPU(s)"; }
const char* const kReinit =
    R"(elastic mode reinitialization complete, updated rank: \d+ -> \d+ size: (\d+) -> (\d+))";

// Bounds of each wait. The lab cases' jobs run kIters iterations: long enough that the job is still
// training when the changes are made and seen, short enough to end soon (0.3-1.3 s an iteration, 2 or 3
// ranks on 2 cores). Measured with Job::met's lines (2026-12-06, in CI's plain and sanitized suites and
// under a parallel build): a newcomer joins 1-3 s after the discovery script lists it, by iteration 5
// (under the real horovodrun by iteration 3). A host cut off or a worker stopped holds the others in their
// collectives until hvrun resets the world, so they cannot run out of iterations meanwhile: those cases
// run kHeldIters, enough for the 2 before the fault and a few in the smaller world after it. A newcomer
// left out is named only after hvrun's own timeouts, at iteration 13-23, while the others train on: those
// cases run kLeftOutIters.
constexpr auto kStepTimeout = 180s;
constexpr auto kJobTimeout = 420s;
constexpr int kIters = 40;
constexpr int kHeldIters = 20;
constexpr int kLeftOutIters = 50;
// A host lost, then back: it joined again at iteration 9 (47 s after the start, under the sanitizers: the
// others were held most of that time) and at iteration 10 and 14 in the plain suite.
constexpr int kReturnIters = 40;
constexpr int kReferenceIters = 40;

std::string regex_escape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

bool has(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern));
}

// The ranks hvrun says the job has once `host` joined, or nothing when it has not said so.
std::optional<int> joined_ranks(const std::string& err, const std::string& host) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(joined_pattern(regex_escape(host))))) return std::nullopt;
  return std::stoi(m[1].str());
}

bool named_lost(const std::string& err, const std::string& host) {
  const std::string h = regex_escape(host);
  return has(err, lost_pattern(h)) || has(err, blacklisted_pattern(h));
}

// Horovod's world sizes in order, from its reinitialization lines: the size before the first reset, then
// each new size (every surviving rank prints the same change; repeats are folded).
std::vector<int> horovod_sizes(const std::string& text) {
  static const std::regex reinit(kReinit);
  std::vector<int> sizes;
  for (std::sregex_iterator it(text.begin(), text.end(), reinit), end; it != end; ++it) {
    const int from = std::stoi((*it)[1].str()), to = std::stoi((*it)[2].str());
    if (sizes.empty()) sizes.push_back(from);
    if (from == sizes.back() && to != from) sizes.push_back(to);
  }
  return sizes;
}

std::string sizes_text(const std::vector<int>& sizes) {
  std::string s;
  for (int v : sizes) s += (s.empty() ? "" : " -> ") + std::to_string(v);
  return s.empty() ? "(no reinitialization line)" : s;
}

// What the launcher printed; sanitizer reports lead, since CI shows only the start and the end of a long
// failure message.
std::string transcript(const std::string& out, const std::string& err) {
  std::string reports;
  std::istringstream lines(err);
  for (std::string l; std::getline(lines, l);)
    if (l.find("Sanitizer") != std::string::npos || l.find("runtime error:") != std::string::npos) reports += l + "\n";
  return (reports.empty() ? "" : "--- sanitizer reports in the launcher's stderr:\n" + reports) +
         "--- the launcher's stdout:\n" + out + "\n--- the launcher's stderr:\n" + err;
}

// The unchanged Horovod example; shared/ sits beside the checkout (CI) or beside the folder of worktrees.
std::optional<std::string> elastic_example() {
  const std::string name = "shared/horovod/examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py";
  for (const char* up : {"/../", "/../../"}) {
    const fs::path p = fs::path(source_dir() + up + name);
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  }
  return std::nullopt;
}

std::vector<std::string> example_args(int iters) {
  return {"--model", "shufflenet_v2_x0_5", "--batch-size", "4", "--num-warmup-batches", "1",
          "--num-batches-per-iter", "1", "--num-iters", std::to_string(iters)};
}

// Why the Horovod cases cannot run here ("skipped: ..."), or nothing when they can.
std::optional<std::string> horovod_example_unavailable() {
  if (!horovod_site()) return horovod_missing();
  if (!elastic_example())
    return std::string("skipped: no Horovod examples in ../shared/horovod/examples (beside the checkout)");
  auto r = run({kDebianPython, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchvision') is None)"},
               60s);
  if (r.exit_code != 0)
    return std::string("skipped: ") + kDebianPython +
           " has no torchvision (the example's models): apt-get install python3-torchvision";
  return std::nullopt;
}

// A discovery script in `dir` that prints `dir`/hosts; set_hosts() replaces that file in one rename, so
// the script never reads half of it.
struct Discovery {
  fs::path dir;
  std::string script;
  explicit Discovery(const fs::path& d) : dir(d), script((d / "discover.sh").string()) {
    std::ofstream(script) << "#!/bin/sh\nexec cat '" << (dir / "hosts").string() << "'\n";
    fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  }
  void set_hosts(const std::vector<std::string>& lines) const {
    const fs::path tmp = dir / "hosts.new";
    {
      std::ofstream f(tmp);
      for (const auto& l : lines) f << l << "\n";
    }
    fs::rename(tmp, dir / "hosts");
  }
};

// A script of its own in `dir` with `body`.
std::string write_script(const fs::path& dir, const std::string& name, const std::string& body) {
  const std::string path = (dir / name).string();
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

// A launcher (hvrun or horovodrun) running in the background, read while it runs. Every wait is bounded: when
// it runs out, or the launcher ends before what is awaited, the launcher gets SIGINT (SIGKILL 30 s later)
// and the case fails with all it printed.
class Job {
 public:
  explicit Job(const std::vector<std::string>& argv) : p_(argv) {}

  const std::string& out() const { return p_.stdout_so_far(); }
  const std::string& err() const { return p_.stderr_so_far(); }

  void await(const std::string& what, std::chrono::milliseconds timeout, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (done()) return met(what);
      if (is_zombie_or_gone(p_.pid())) {
        p_.pump_for(500ms);  // what it printed last
        if (done()) return met(what);
        auto r = p_.wait(10s);
        FAIL("the job ended (exit code " << r.exit_code << ") before " << what << "\n" << transcript(r.out, r.err));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        p_.signal(SIGINT);
        auto r = p_.wait(30s);
        FAIL("not within " << std::chrono::duration_cast<std::chrono::seconds>(timeout).count() << " s: " << what
                           << "\n" << transcript(r.out, r.err));
      }
      p_.pump_for(100ms);
    }
  }

  // Reads until the launcher ends; past `timeout` it is stopped and the case fails.
  ChildResult finish(std::chrono::milliseconds timeout) {
    await("the job's end", timeout, [&] { return is_zombie_or_gone(p_.pid()); });
    return p_.wait(30s);
  }

  int iterations() const { return count_of(out(), kIter); }
  void signal(int sig) { p_.signal(sig); }

 private:
  // When each awaited event came, on stderr (ctest keeps it): the figures that each case's iteration
  // count (kIters) is sized from.
  void met(const std::string& what) const {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
    std::fprintf(stderr, "elastic lab: %s after %.1f s, at iteration %d\n", what.c_str(), ms.count() / 1000.0,
                 iterations());
  }

  ChildProcess p_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// Processes of host i that carry `marker`, polled: /proc/PID/environ reads empty while a process execs.
std::vector<int> marked_on_host(const Lab& lab, int i, const std::string& marker, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto pids = lab.processes_on_host(i, marker);
    if (!pids.empty() || std::chrono::steady_clock::now() >= deadline) return pids;
    std::this_thread::sleep_for(200ms);
  }
}

// hvrun's argv for the example in elastic mode on lab host 0 (the lab's port and key, a HOME of its own).
std::vector<std::string> elastic_hvrun(const Lab& lab, const TempHome& home, const Discovery& discovery,
                                       const std::string& marker, int np, std::vector<std::string> extra,
                                       int iters = kIters) {
  std::vector<std::string> a{"--verbose", "--kill-grace", "2", "-np", std::to_string(np), "--min-np", "2",
                             "--max-np", "4", "--host-discovery-script", discovery.script};
  a.insert(a.end(), extra.begin(), extra.end());
  for (const std::string& e : {"PYTHONPATH=" + *horovod_site(), std::string("HOROVOD_LOG_LEVEL=debug"),
                               std::string("OMP_NUM_THREADS=1"), std::string("PYTHONUNBUFFERED=1"), marker}) {
    a.push_back("-x");
    a.push_back(e);
  }
  a.push_back(kDebianPython);
  a.push_back(*elastic_example());
  for (const auto& x : example_args(iters)) a.push_back(x);
  return hvrun_on(lab, home, a);
}

// Where the elastic lab cases cannot run (no lab, no Horovod or its example): warns "skipped: ..." and
// returns from the case.
#define HVRUN_SKIP_WITHOUT_ELASTIC_LAB()              \
  do {                                                \
    HVRUN_SKIP_WITHOUT_LAB();                         \
    if (auto why = horovod_example_unavailable()) {   \
      WARN(*why);                                     \
      return;                                         \
    }                                                 \
  } while (0)

// One elastic lab case's world: the lab, hvrun's HOME, the discovery script's folder, and the marker the
// ranks carry.
struct ElasticLab {
  Lab lab;
  TempHome home;
  SharedDir shared;
  std::string marker = unique_marker();
  Discovery discovery{shared.dir};
  ElasticLab(int hosts, const std::string& name) : lab(hosts), shared(name) {}
  std::string host(int i) const { return lab.host(i); }
  std::vector<std::string> hvrun(int np, std::vector<std::string> extra, int iters = kIters) const {
    return elastic_hvrun(lab, home, discovery, marker, np, std::move(extra), iters);
  }
  // hvrun on hosts 1 and 2, one slot each (fast on 2 cores); once they trained 2 iterations, the
  // discovery script lists host 3 too.
  std::unique_ptr<Job> two_then_third(std::vector<std::string> extra = {}, int iters = kIters) const {
    discovery.set_hosts({host(1) + ":1", host(2) + ":1"});
    auto job = std::make_unique<Job>(hvrun(2, std::move(extra), iters));
    job->await("2 iterations on the first 2 ranks", kStepTimeout, [&] { return job->iterations() >= 2; });
    discovery.set_hosts({host(1) + ":1", host(2) + ":1", host(3) + ":1"});
    return job;
  }
};

}  // namespace

TEST_CASE("Horovod elastic under hvrun: a host added through the discovery script joins, a host whose ranks are "
          "killed is blacklisted, the job ends 0",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-add-kill");
  const Lab& lab = t.lab;
  const std::string h1 = lab.host(1), h2 = lab.host(2), h3 = lab.host(3);
  const std::string& marker = t.marker;
  const auto started = t.two_then_third();
  Job& job = *started;
  job.await(h3 + " joined (hvrun) and Horovod's size 3", kStepTimeout, [&] {
    const auto sizes = horovod_sizes(job.out() + job.err());
    return joined_ranks(job.err(), h3) && sizes.size() >= 2 && sizes[1] == 3;
  });
  CHECK(joined_ranks(job.err(), h3).value_or(-1) == 3);
  // The 3 ranks train together before one of them dies.
  const int at_join = job.iterations();
  job.await("2 iterations on 3 ranks", kStepTimeout, [&] { return job.iterations() >= at_join + 2; });

  // The lab's hosts are network namespaces of this machine's pid namespace: their pids are ours to kill.
  const auto victims = marked_on_host(lab, 2, marker, 10s);
  {
    INFO(transcript(job.out(), job.err()));
    REQUIRE(!victims.empty());
  }
  for (int pid : victims) ::kill(pid, SIGKILL);

  auto r = job.finish(kJobTimeout);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(started_line(2)));
  const auto sizes = horovod_sizes(r.out + r.err);
  INFO("Horovod's sizes: " << sizes_text(sizes));
  CHECK(sizes == std::vector<int>{2, 3, 2});
  CHECK(named_lost(r.err, h2));
  CHECK_FALSE(named_lost(r.err, h1));
  CHECK_FALSE(named_lost(r.err, h3));
  CHECK_THAT(r.out, Catch::Contains(total_line(2)));  // the program's own hvd.size() at its end
  CHECK(wait_until_gone(marker, 5s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

namespace {

// Debian's torch's package metadata (what a fingerprint reads as its version), or nothing.
std::optional<fs::path> torch_metadata() {
  const fs::path site = "/usr/lib/python3/dist-packages";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(site, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("torch-", 0) != 0) continue;
    for (const char* file : {"METADATA", "PKG-INFO"})
      if (fs::exists(e.path() / file)) return e.path() / file;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("Horovod elastic under hvrun: a newcomer gets --sync's files and its fingerprint compared (another torch "
          "named) before its first worker, Ctrl-C shows every worker's stack, --output-filename keeps each worker's",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-newcomer-checks");
  const std::string h3 = t.host(3);
  const fs::path work = t.shared.dir / "work", empty = t.shared.dir / "empty", out = t.shared.dir / "out";
  const std::string data = "what every worker reads\n";
  hvrun::testing::write_text(work / "data.txt", data);
  fs::create_directories(empty);
  const auto torch = torch_metadata();
  REQUIRE(torch);
  hvrun::testing::write_text(t.shared.dir / "old-torch", "Metadata-Version: 2.1\nName: torch\nVersion: 1.12.1\n");
  // Host 3 sees an empty work directory and another torch (one bind call: each replaces the last).
  REQUIRE(t.lab.control({"bind", "3", empty.string(), work.string(), (t.shared.dir / "old-torch").string(),
                         torch->string()}) == 0);

  const auto started = t.two_then_third({"--sync", work.string(), "--output-filename", out.string()});
  Job& job = *started;
  job.await(h3 + " joined", kStepTimeout, [&] { return joined_ranks(job.err(), h3).has_value(); });
  const int at_join = job.iterations();
  job.await("2 iterations on 3 ranks", kStepTimeout, [&] { return job.iterations() >= at_join + 2; });
  job.signal(SIGINT);
  auto r = job.finish(60s);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 128 + SIGINT);
  // The newcomer's checks came before its worker: the copy, then the difference, named.
  const auto copied = r.err.find("--sync: sent 1 file, " + std::to_string(data.size()) + " bytes, to " + h3);
  const auto differs = r.err.find("hvrun: hosts differ: " + h3 + ": torch 1.12.1; ");
  const auto joined = r.err.find(h3 + " joined");
  CHECK(copied != std::string::npos);
  CHECK(differs != std::string::npos);
  CHECK(copied < joined);
  CHECK(differs < joined);
  CHECK(hvrun::testing::read_text(empty / "data.txt") == data);
  // Ctrl-C: every worker's stack, then the stop.
  CHECK_THAT(r.err, Catch::Contains("received SIGINT; stopping all workers, once their stacks are in (a second SIGINT "
                                    "stops them at once)"));
  CHECK_THAT(r.err, Catch::Contains("hvrun: where the 3 running ranks are:\n"));
  CHECK_THAT(r.err, !Catch::Contains("no stacks from"));
  // --output-filename: each worker's streams, rank 0's iterations among them.
  std::string files;
  for (int w = 0; w < 3; ++w) {
    INFO("worker " << w);
    CHECK(fs::exists(out / ("rank." + std::to_string(w)) / "stderr"));
    files += hvrun::testing::read_text(out / ("rank." + std::to_string(w)) / "stdout");
  }
  CHECK_THAT(files, Catch::Contains("Iter #"));
  CHECK(wait_until_gone(t.marker, 10s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: --stall-timeout, when no worker prints or computes, shows their stacks and "
          "ends the job 1",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(3, "elastic-stall");
  t.discovery.set_hosts({t.host(1) + ":1", t.host(2) + ":1"});
  Job job(t.hvrun(2, {"--stall-timeout", "8"}));
  job.await("2 iterations", kStepTimeout, [&] { return job.iterations() >= 2; });
  // Stopped, the workers neither print nor use CPU: what a hang looks like from outside.
  for (int h : {1, 2})
    for (int pid : marked_on_host(t.lab, h, t.marker, 10s)) ::kill(pid, SIGSTOP);
  auto r = job.finish(120s);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("hvrun: no rank printed anything or used CPU for 8 s (--stall-timeout); collecting "
                                    "every rank's stack, then stopping all ranks\n"));
  CHECK_THAT(r.err, Catch::Contains("hvrun: where the 2 running ranks are:"));
  CHECK(wait_until_gone(t.marker, 10s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a host cut off mid-run (iptables) is lost, the others go on to exit 0",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-cut");
  const Lab& lab = t.lab;
  const std::string h1 = lab.host(1), h2 = lab.host(2), h3 = lab.host(3);
  const std::string& marker = t.marker;
  const Discovery& discovery = t.discovery;
  // The discovery script keeps listing the cut host, as a scheduler that does not know would.
  discovery.set_hosts({h1 + ":1", h2 + ":1", h3 + ":1"});
  Job job(t.hvrun(3, {"--heartbeat-timeout", "5"}, kHeldIters));

  job.await("2 iterations on 3 ranks", kStepTimeout, [&] { return job.iterations() >= 2; });
  REQUIRE(lab.control({"cut", "3"}) == 0);
  auto r = job.finish(kJobTimeout);
  lab.control({"uncut", "3"});
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(started_line(3)));
  const auto sizes = horovod_sizes(r.out + r.err);
  INFO("Horovod's sizes: " << sizes_text(sizes));
  CHECK(sizes == std::vector<int>{3, 2});
  CHECK(has(r.err, lost_pattern(regex_escape(h3))));
  CHECK_FALSE(named_lost(r.err, h1));
  CHECK_FALSE(named_lost(r.err, h2));
  CHECK_THAT(r.out, Catch::Contains(total_line(2)));
  // The cut host's agent heard nothing for its heartbeat timeout and ended its rank itself.
  CHECK(wait_until_gone(marker, 10s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a worker still silent after a failure (blocked until Gloo's timeout) is "
          "replaced by a fresh one, and the job goes on without waiting that timeout",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-silent");
  const Lab& lab = t.lab;
  const std::string h1 = lab.host(1), h2 = lab.host(2), h3 = lab.host(3);
  const std::string& marker = t.marker;
  t.discovery.set_hosts({h1 + ":1", h2 + ":1", h3 + ":1"});
  Job job(t.hvrun(3, {}, kHeldIters));
  job.await("2 iterations on 3 ranks", kStepTimeout, [&] { return job.iterations() >= 2; });

  // Host 3's worker stopped stands for one blocked in a recv that no closed connection wakes (as in about
  // half of the kills in scripts/bench_elastic.sh): it never asks rank_and_size by itself. Then host 2's
  // worker dies. Without a replacement, host 1's worker would wait for it in the rendezvous of the world
  // of 2 until Gloo's timeout, then abort.
  const auto silent = marked_on_host(lab, 3, marker, 10s);
  const auto victims = marked_on_host(lab, 2, marker, 10s);
  {
    INFO(transcript(job.out(), job.err()));
    REQUIRE(!silent.empty());
    REQUIRE(!victims.empty());
  }
  for (int pid : silent) ::kill(pid, SIGSTOP);
  for (int pid : victims) ::kill(pid, SIGKILL);

  auto r = job.finish(kJobTimeout);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("worker " + h3 + "[0] is still silent"));
  CHECK_THAT(r.err, Catch::Contains("replacing it with a fresh worker"));
  const auto sizes = horovod_sizes(r.out + r.err);
  INFO("Horovod's sizes: " << sizes_text(sizes));
  CHECK(sizes == std::vector<int>{3, 2});
  CHECK(named_lost(r.err, h2));
  CHECK_FALSE(named_lost(r.err, h3));  // its slot stays, with a fresh worker
  CHECK_THAT(r.out + r.err, !Catch::Contains("Timed out waiting"));  // nobody waited out Gloo's timeout
  CHECK_THAT(r.out, Catch::Contains(total_line(2)));
  CHECK(wait_until_gone(marker, 10s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a newcomer lost during the rendezvous (the others wait for it there) is "
          "dropped, and the others go on to exit 0",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-lost-in-rendezvous");
  const std::string h3 = t.host(3);
  // Once hvrun says host 3 joined, the two ranks of the old world have reset and wait for their new ranks
  // while host 3's new rank is still starting (its `import torch` alone takes seconds): host 3 is cut off
  // then. (Given their new ranks at once, as under horovodrun, they would wait in Gloo's rendezvous for
  // host 3's rank until Gloo's timeout, then abort.)
  auto started = t.two_then_third({"--heartbeat-timeout", "5"});
  started->await(h3 + " joined (hvrun)", kStepTimeout, [&] { return joined_ranks(started->err(), h3).has_value(); });
  REQUIRE(t.lab.control({"cut", "3"}) == 0);
  auto r = started->finish(kJobTimeout);
  t.lab.control({"uncut", "3"});
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  // hvrun held the old world's 2 workers in rank_and_size (not in Gloo's rendezvous, where they would have
  // aborted after Gloo's 30 s, as they do under horovodrun) and gave them a world of 2 instead.
  CHECK_THAT(r.err, Catch::Contains("holding the 2 workers of the last world until the 1 new ones reach the rendezvous"));
  CHECK(has(r.err, lost_pattern(regex_escape(h3))));
  CHECK_FALSE(named_lost(r.err, t.host(1)));
  CHECK_FALSE(named_lost(r.err, t.host(2)));
  CHECK_THAT(r.err, Catch::Contains("elastic: 2 ranks on "));
  CHECK_THAT(r.out + r.err, !Catch::Contains("Wait timeout after"));
  CHECK_THAT(r.out, Catch::Contains(total_line(2)));
  CHECK(wait_until_gone(t.marker, 10s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a host lost, then back after its blacklist cooldown, starts afresh and "
          "joins again",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-return");
  const std::string h3 = t.host(3);
  t.discovery.set_hosts({t.host(1) + ":1", t.host(2) + ":1", h3 + ":1"});
  // Long enough for the loss (5 s), the cooldown (3-4 s) and the return (a new agent, probes, a knock,
  // the new rank's start) while the others train.
  Job job(t.hvrun(3, {"--heartbeat-timeout", "5", "--blacklist-cooldown-range", "3", "4"}, kReturnIters));
  job.await("2 iterations on 3 ranks", kStepTimeout, [&] { return job.iterations() >= 2; });
  REQUIRE(t.lab.control({"cut", "3"}) == 0);
  job.await(h3 + " lost", kStepTimeout, [&] { return has(job.err(), lost_pattern(regex_escape(h3))); });
  t.lab.control({"uncut", "3"});
  job.await(h3 + " joined again", kStepTimeout, [&] { return joined_ranks(job.err(), h3).has_value(); });
  auto r = job.finish(kJobTimeout);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(h3 + " blacklisted for ") && Catch::Contains(h3 + " is listed again; it starts afresh"));
  CHECK(joined_ranks(r.err, h3).value_or(-1) == 3);
  const auto sizes = horovod_sizes(r.out + r.err);
  INFO("Horovod's sizes: " << sizes_text(sizes));
  CHECK(sizes == std::vector<int>{3, 2, 3});
  CHECK_THAT(r.out, Catch::Contains(total_line(3)));
  CHECK(wait_until_gone(t.marker, 10s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a newcomer whose NICs no member reaches is left out, named, and the job "
          "goes on",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-unreachable");
  const Lab& lab = t.lab;
  const std::string h3 = lab.host(3);
  const std::string& marker = t.marker;
  // Host 3 answers SSH (its agent starts) but drops every other connection from hosts 1 and 2: none of its
  // NICs passes the probes.
  REQUIRE(lab.control({"oneway", "3", "1"}) == 0);
  REQUIRE(lab.control({"oneway", "3", "2"}) == 0);
  const auto started = t.two_then_third({}, kLeftOutIters);
  Job& job = *started;
  job.await(h3 + " left out", kStepTimeout, [&] { return job.err().find(left_out_line(h3)) != std::string::npos; });
  auto r = job.finish(kJobTimeout);
  lab.control({"oneway-clear", "3"});
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(left_out_line(h3) + "none of its NICs reached the job's other hosts"));
  CHECK_THAT(r.err, Catch::Contains("the job goes on without it"));
  CHECK_FALSE(joined_ranks(r.err, h3));
  CHECK(horovod_sizes(r.out + r.err).empty());  // the world never changed
  CHECK_THAT(r.out, Catch::Contains(total_line(2)));
  CHECK(wait_until_gone(marker, 5s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a newcomer behind a NAT (the launcher sees it from another address) is "
          "admitted by its knock and trains",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-nat");
  const Lab& lab = t.lab;
  const std::string h3 = lab.host(3);
  // Host 0 (hvrun's) sees host 3's connections come from 100.64.0.3, an address of no host.
  REQUIRE(lab.control({"nat", "0", "3"}) == 0);
  const auto started = t.two_then_third();
  Job& job = *started;
  job.await(h3 + " joined (hvrun) and Horovod's size 3", kStepTimeout, [&] {
    const auto sizes = horovod_sizes(job.out() + job.err());
    return joined_ranks(job.err(), h3) && !sizes.empty() && sizes.back() == 3;
  });
  auto r = job.finish(kJobTimeout);
  lab.control({"nat-clear", "0"});
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("admitted " + h3 + ": ") && Catch::Contains(" from 100.64.0.3"));
  CHECK(horovod_sizes(r.out + r.err) == std::vector<int>{2, 3});
  CHECK_THAT(r.out, Catch::Contains(total_line(3)));
  CHECK(wait_until_gone(t.marker, 5s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: a newcomer whose connections to the launcher are dropped is left out, named, "
          "and the job goes on",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(4, "elastic-no-way-back");
  const Lab& lab = t.lab;
  const std::string h3 = lab.host(3);
  // Host 0 (hvrun's) drops every connection host 3 opens to it; SSH from host 0 to host 3 works, and
  // host 3 reaches hosts 1 and 2, so it passes its probes: only its knock shows the problem.
  REQUIRE(lab.control({"oneway", "0", "3"}) == 0);
  const auto started = t.two_then_third({}, kLeftOutIters);
  Job& job = *started;
  job.await(h3 + " left out", kStepTimeout, [&] { return job.err().find(left_out_line(h3)) != std::string::npos; });
  auto r = job.finish(kJobTimeout);
  lab.control({"oneway-clear", "0"});
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains(left_out_line(h3) + "its workers could not reach hvrun's rendezvous at ") &&
                        Catch::Contains("no answer within 5 s") && Catch::Contains("the job goes on without it"));
  CHECK_FALSE(joined_ranks(r.err, h3));
  CHECK(horovod_sizes(r.out + r.err).empty());
  CHECK_THAT(r.out, Catch::Contains(total_line(2)));
  CHECK(wait_until_gone(t.marker, 5s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: with --reset-limit 0 a killed rank ends the job at the first reset, saying so",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(3, "elastic-reset-limit");
  const Lab& lab = t.lab;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string& marker = t.marker;
  const Discovery& discovery = t.discovery;
  discovery.set_hosts({h1 + ":1", h2 + ":1"});
  Job job(t.hvrun(2, {"--reset-limit", "0"}));
  job.await("2 iterations on 2 ranks", kStepTimeout, [&] { return job.iterations() >= 2; });
  const auto victims = marked_on_host(lab, 2, marker, 10s);
  {
    INFO(transcript(job.out(), job.err()));
    REQUIRE(!victims.empty());
  }
  for (int pid : victims) ::kill(pid, SIGKILL);
  auto r = job.finish(kJobTimeout);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--reset-limit 0 reached: the job was reset 0 times already, so it ends here"));
  CHECK_THAT(r.out, !Catch::Contains(total_line(2)));  // it never finished
  CHECK(wait_until_gone(marker, 10s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: failures on every host blacklist them all, and the job ends saying so",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_ELASTIC_LAB();
  const ElasticLab t(3, "elastic-all-blacklisted");
  const Lab& lab = t.lab;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  t.discovery.set_hosts({h1 + ":2", h2 + ":1"});
  Job job(t.hvrun(3, {}));
  job.await("2 iterations on 3 ranks", kStepTimeout, [&] { return job.iterations() >= 2; });
  // Local rank 0 of both hosts dies; host 1's local rank 1 lives and re-initialises. Each host had a
  // failed worker, so each is blacklisted, and no host is left (Horovod's "all blacklisted" end), though
  // not every worker failed.
  std::vector<int> victims;
  for (int host : {1, 2})
    for (int pid : marked_on_host(lab, host, t.marker, 10s)) {
      const auto rank0 = processes_with_marker("HOROVOD_LOCAL_RANK=0");
      if (std::find(rank0.begin(), rank0.end(), pid) != rank0.end()) victims.push_back(pid);
    }
  {
    INFO(transcript(job.out(), job.err()));
    REQUIRE(victims.size() == 2);
  }
  for (int pid : victims) ::kill(pid, SIGKILL);
  auto r = job.finish(kJobTimeout);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("elastic: every host of the job is blacklisted"));
  CHECK(named_lost(r.err, h1));
  CHECK(named_lost(r.err, h2));
  CHECK(wait_until_gone(t.marker, 10s).empty());
  CHECK(agents_left(agent_pids(r.err), 5s).empty());
}

TEST_CASE("Horovod elastic under hvrun: the discovery script failing on its first run ends the job, naming the "
          "script",
          "[integration][elastic]") {
  SharedDir dir("elastic-script-fails");
  const std::string script = write_script(dir.dir, "discover.sh", "echo 'no hosts today' >&2\nexit 3");
  auto r = run({hvrun_bin(), "-np", "2", "--host-discovery-script", script, "true"}, 60s);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 1);  // ended by itself, as a job that could not start
  CHECK_THAT(r.err, Catch::Contains(script));
  CHECK_THAT(r.err, Catch::Contains(script_exit_code(3)));
}

TEST_CASE("Horovod elastic under hvrun: a discovery script line without slots and no --slots-per-host is refused "
          "by name",
          "[integration][elastic]") {
  SharedDir dir("elastic-no-slots");
  const std::string script = write_script(dir.dir, "discover.sh", "echo localhost");
  auto r = run({hvrun_bin(), "-np", "1", "--host-discovery-script", script, "true"}, 60s);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 1);  // the first run's output is refused like its failure: the job cannot start
  CHECK_THAT(r.err, Catch::Contains(kSlotsPerHost));
  CHECK_THAT(r.err, Catch::Contains("localhost"));
}

TEST_CASE("Horovod elastic reference: the same example under the real horovodrun adds a host",
          "[lab][horovod][elastic]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (auto why = horovod_example_unavailable()) {
    WARN(*why);
    return;
  }
  // horovodrun takes one --network-interface for every host (a list crashes it), and in elastic mode it
  // needs one, or it waits for 2 hosts before probing theirs: a lab whose fabric NIC is eth1 everywhere.
  Lab lab(4, Lab::default_prefix(), {"LAB_FABRIC_NAMES=eth1"});
  TempHome home;
  SharedDir shared("elastic-reference");
  const std::string h1 = lab.host(1), h2 = lab.host(2), h3 = lab.host(3);
  const std::string marker = unique_marker();
  Discovery discovery(shared.dir);
  discovery.set_hosts({h1 + ":1", h2 + ":1"});
  // horovodrun has no -x: the ranks get its whole environment (its ssh command line starts with `env ...`).
  std::vector<std::string> cmd{"/usr/bin/env", "HOME=" + home.dir.string(), "PYTHONPATH=" + *horovod_site(),
                               "HOROVOD_LOG_LEVEL=debug", "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1", marker,
                               kDebianPython, fs::path(*horovod_site()).parent_path().string() + "/bin/horovodrun",
                               "--gloo", "--network-interface", "eth1", "-p", lab.var("LAB_PORT"), "-i",
                               lab.var("LAB_KEY"), "-np", "2", "--min-np", "2", "--max-np", "4",
                               "--host-discovery-script", discovery.script, kDebianPython, *elastic_example()};
  for (const auto& x : example_args(kReferenceIters)) cmd.push_back(x);
  Job job(lab.on_host(0, cmd));

  job.await("2 iterations on the first 2 ranks", kStepTimeout, [&] { return job.iterations() >= 2; });
  discovery.set_hosts({h1 + ":1", h2 + ":1", h3 + ":1"});
  job.await("Horovod's size 3", kStepTimeout, [&] {
    const auto sizes = horovod_sizes(job.out() + job.err());
    return sizes.size() >= 2 && sizes[1] == 3;
  });
  auto r = job.finish(kJobTimeout);
  INFO(transcript(r.out, r.err));
  CHECK(r.exit_code == 0);
  const auto sizes = horovod_sizes(r.out + r.err);
  INFO("Horovod's sizes: " << sizes_text(sizes));
  CHECK(sizes == std::vector<int>{2, 3});
  CHECK_THAT(r.out, Catch::Contains(total_line(3)));
  CHECK(wait_until_gone(marker, 5s).empty());
}

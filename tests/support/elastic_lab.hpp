#pragma once
// Test support for Horovod elastic under hvrun on the lab (test_elastic_lab.cpp,
// test_elastic_lab_admission.cpp): the real Horovod 0.28.1 elastic example
// (../shared/horovod/examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py, unchanged), a
// discovery script whose output the case changes, a launcher read while it runs, and the lines of hvrun,
// the program and Horovod that the cases look for.
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
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

namespace hvrun::test {

// ---- hvrun's elastic lines on stderr, in one place (the launcher's wording may still shift) ----------------
// "elastic: started <N> ranks on <hosts>"
std::string started_line(int ranks);
// "<host> joined: <N> ranks now" (N: the job's ranks once the host is in)
std::string joined_pattern(const std::string& host_re);
// "<host> lost (<why>)"
std::string lost_pattern(const std::string& host_re);
// "<host> blacklisted for ..." (after a worker of it failed, or it was lost)
std::string blacklisted_pattern(const std::string& host_re);
// "<host> is left out of the elastic job: <why>; the job goes on without it"
std::string left_out_line(const std::string& host);
// The discovery script's failures (tests 3 and 4).
std::string script_exit_code(int code);
inline const char* const kSlotsPerHost = "--slots-per-host";
// ---- the program's and Horovod's lines ------------------------------------------------------------------------
inline const char* const kIter = "<stdout>:Iter #";  // rank 0's "Iter #K: X img/sec per CPU"
// Rank 0's last line, as the example prints it. Not anchored at the line's start: Horovod's own C++ log
// (HOROVOD_LOG_LEVEL=debug here) writes to the same stdout as the program's print, and a log line's
// "[time: D " can come just before it on one line (seen in CI).
std::string total_line(int size);
inline const char* const kReinit =
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
inline constexpr std::chrono::seconds kStepTimeout{180};
inline constexpr std::chrono::seconds kJobTimeout{420};
inline constexpr int kIters = 40;
inline constexpr int kHeldIters = 20;
inline constexpr int kLeftOutIters = 50;
// A host lost, then back: it joined again at iteration 9 (47 s after the start, under the sanitizers: the
// others were held most of that time) and at iteration 10 and 14 in the plain suite.
inline constexpr int kReturnIters = 40;
inline constexpr int kReferenceIters = 40;

std::string regex_escape(const std::string& s);
bool has(const std::string& text, const std::string& pattern);
// The ranks hvrun says the job has once `host` joined, or nothing when it has not said so.
std::optional<int> joined_ranks(const std::string& err, const std::string& host);
bool named_lost(const std::string& err, const std::string& host);

// Horovod's world sizes in order, from its reinitialization lines: the size before the first reset, then
// each new size (every surviving rank prints the same change; repeats are folded).
std::vector<int> horovod_sizes(const std::string& text);
std::string sizes_text(const std::vector<int>& sizes);

// What the launcher printed; sanitizer reports lead, since CI shows only the start and the end of a long
// failure message.
std::string transcript(const std::string& out, const std::string& err);

// The unchanged Horovod example; shared/ sits beside the checkout (CI) or beside the folder of worktrees.
std::optional<std::string> elastic_example();
std::vector<std::string> example_args(int iters);
// Why the Horovod cases cannot run here ("skipped: ..."), or nothing when they can.
std::optional<std::string> horovod_example_unavailable();

// A discovery script in `dir` that prints `dir`/hosts; set_hosts() replaces that file in one rename, so
// the script never reads half of it.
struct Discovery {
  std::filesystem::path dir;
  std::string script;
  explicit Discovery(const std::filesystem::path& d);
  void set_hosts(const std::vector<std::string>& lines) const;
};

// A script of its own in `dir` with `body`.
std::string write_script(const std::filesystem::path& dir, const std::string& name, const std::string& body);

// A launcher (hvrun or horovodrun) running in the background, read while it runs. Every wait is bounded: when
// it runs out, or the launcher ends before what is awaited, the launcher gets SIGINT (SIGKILL 30 s later)
// and the case fails with all it printed.
class Job {
 public:
  explicit Job(const std::vector<std::string>& argv) : p_(argv) {}

  const std::string& out() const { return p_.stdout_so_far(); }
  const std::string& err() const { return p_.stderr_so_far(); }

  void await(const std::string& what, std::chrono::milliseconds timeout, const std::function<bool()>& done);

  // Reads until the launcher ends; past `timeout` it is stopped and the case fails.
  ChildResult finish(std::chrono::milliseconds timeout);

  int iterations() const { return count_of(out(), kIter); }
  void signal(int sig) { p_.signal(sig); }

 private:
  // When each awaited event came, on stderr (ctest keeps it): the figures that each case's iteration
  // count (kIters) is sized from.
  void met(const std::string& what) const;

  ChildProcess p_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// Processes of host i that carry `marker`, polled: /proc/PID/environ reads empty while a process execs.
std::vector<int> marked_on_host(const Lab& lab, int i, const std::string& marker, std::chrono::milliseconds timeout);

// hvrun's argv for the example in elastic mode on lab host 0 (the lab's port and key, a HOME of its own).
std::vector<std::string> elastic_hvrun(const Lab& lab, const TempHome& home, const Discovery& discovery,
                                       const std::string& marker, int np, std::vector<std::string> extra,
                                       int iters = kIters);

// Where the elastic lab cases cannot run (no lab, no Horovod or its example): warns "skipped: ..." and
// returns from the case.
#define HVRUN_SKIP_WITHOUT_ELASTIC_LAB()                                \
  do {                                                                  \
    HVRUN_SKIP_WITHOUT_LAB();                                           \
    if (auto why = ::hvrun::test::horovod_example_unavailable()) {      \
      WARN(*why);                                                       \
      return;                                                           \
    }                                                                   \
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
  std::unique_ptr<Job> two_then_third(std::vector<std::string> extra = {}, int iters = kIters) const;
};

}  // namespace hvrun::test

// Horovod elastic under hvrun (--host-discovery-script), hosts that change: the real Horovod 0.28.1 elastic
// example on lab hosts (tests/support/elastic_lab.hpp) while the discovery script's output changes: a host
// added joins (after --sync's files and its fingerprint), a host whose ranks are killed is blacklisted, a
// host cut off is lost (also while the others wait for it in the rendezvous), a worker still silent after a
// failure is replaced, a host lost comes back after its cooldown, and the job ends 0 each time with the
// program's own world size following the changes; Ctrl-C and --stall-timeout show every worker's stack.
// Newcomers left out, the job's other ends and the reference run: test_elastic_lab_admission.cpp.
#include <catch2/catch.hpp>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/sshd_fixture.hpp"
#include "tests/support/elastic_lab.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

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

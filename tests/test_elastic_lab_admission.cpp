// Horovod elastic under hvrun (--host-discovery-script), who is let in and how the job ends: a newcomer whose
// NICs no member reaches, or whose connections to the launcher are dropped, is left out, named, and the job
// goes on; one behind a NAT is admitted by its knock; --reset-limit 0 and failures on every host end the job,
// saying so. Two cases need no lab and no Horovod: a failing discovery script, a line without slots. The same
// example under the real horovodrun on a uniform lab is the reference. The machinery is
// tests/support/elastic_lab.hpp's; the hosts that change are test_elastic_lab.cpp's.
#include <catch2/catch.hpp>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/elastic_lab.hpp"
#include "tests/support/horovod_site.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

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

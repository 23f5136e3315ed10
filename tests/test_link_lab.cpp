// The link test on the lab (docs/DESIGN.md §5.6): three hosts, host 2's fabric link shaped with tbf on both
// ends of its veth (netem is not in every kernel). A launch warns, naming host 2 with a figure below
// 6 MB/s, before the first rank's output; --check-only --json carries every pair's figure; without the
// tbf nothing is named; --no-link-test measures nothing; a torch DDP job on the shaped lab has host 2's link
// named while it runs (issue 40, part 2). One lab serves every run. An elastic job (--host-discovery-script)
// on the same shaping names host 2 before its first worker's output too, and says nothing of links with
// --no-link-test.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "launcher/base/shell_quote.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/elastic_lab.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/torch_python.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

// `argv` with its stderr into its stdout, so that their order can be read.
std::vector<std::string> merged(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + hvrun::shell_quote(a);
  return {"/bin/sh", "-c", line + " 2>&1"};
}

int tc(const std::string& ns, const std::string& dev, const std::string& verb) {
  std::vector<std::string> argv{"/usr/bin/env", "ip", "netns", "exec", ns, "tc", "qdisc", verb, "dev", dev, "root"};
  if (verb == "add")
    for (const char* w : {"tbf", "rate", "40mbit", "burst", "32kbit", "latency", "400ms"}) argv.push_back(w);
  return run(argv, 10s).exit_code;
}

// `out` (stdout and stderr merged) names `host_nic` ("NAME IFACE") alone as a degraded link, with a
// figure below 6 MB/s, before the first rank's "rank-says-hi".
void check_named_first(const std::string& out, const std::string& host_nic) {
  const auto warning = out.find(host_nic + " (");
  REQUIRE(warning != std::string::npos);
  const auto first_rank = out.find("rank-says-hi");
  REQUIRE(first_rank != std::string::npos);
  CHECK(warning < first_rank);
  const std::string line = out.substr(warning, out.find('\n', warning) - warning);
  CHECK_THAT(line, Contains("a degraded link?"));
  // "NAME IFACE (ADDR): X MB/s from ..." with X below 6.
  const auto colon = line.find("): ");
  REQUIRE(colon != std::string::npos);
  CHECK(std::stod(line.substr(colon + 3)) < 6.0);
  CHECK(count_of(out, "a degraded link") == 1);
}

}  // namespace

TEST_CASE("link test: a shaped host is named before the first rank, --json carries the figures", "[lab][link]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const auto names = lab.list("LAB_HOSTS");
  const auto fabric = lab.list("LAB_FABRIC_IFACES");
  REQUIRE(names.size() == 3);
  REQUIRE(fabric.size() == 3);
  const std::string hosts = names[0] + "," + names[1] + "," + names[2];
  const std::string host_ns = Lab::default_prefix() + "-h2";
  const std::string switch_ns = Lab::default_prefix() + "-sw";

  {
    INFO("no shaping: nothing is named");
    auto r = run(hvrun_on(lab, home, {"-np", "3", "-H", names[0] + ":1," + names[1] + ":1," + names[2] + ":1",
                                      "--disable-cache", "echo", "rank-says-hi"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "rank-says-hi") == 3);
    CHECK_THAT(r.err, !Contains("degraded link"));
    CHECK_THAT(r.err, !Contains("no link figure"));
  }

  REQUIRE(tc(host_ns, fabric[2], "add") == 0);
  REQUIRE(tc(switch_ns, "h2-fab", "add") == 0);
  {
    INFO("host 2 shaped: named with its figures, before the first rank's output");
    auto r = run(merged(hvrun_on(lab, home, {"-np", "3", "-H", names[0] + ":1," + names[1] + ":1," + names[2] + ":1",
                                             "--disable-cache", "echo", "rank-says-hi"})),
                 60s);
    INFO(r.out);
    CHECK(r.exit_code == 0);
    check_named_first(r.out, names[2] + " " + fabric[2]);
  }
  {
    INFO("--check-only --json: a figure per pair, the shaped ones below 6 MB/s");
    auto r = run(hvrun_on(lab, home, {"--check-only", "--json", "-H", hosts}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);
    const auto& links = doc.at("links");
    REQUIRE(links.size() == 3);
    for (const auto& l : links) {
      INFO(l.dump());
      CHECK(l.at("error").is_null());
      CHECK(l.at("bytes").get<long long>() > 0);
      CHECK(l.at("seconds").get<double>() > 0);
      const double rate = l.at("mb_per_s").get<double>();
      const bool shaped = l.at("from") == names[2] || l.at("to") == names[2];
      if (shaped)
        CHECK(rate < 6.0);
      else
        CHECK(rate > 24.0);
    }
  }
  if (auto why = torch_unavailable()) {
    WARN("the slow link while a job runs: skipped: " << *why);
  } else {
    INFO("host 2 shaped, torch DDP (Gloo, 4 MiB a step) running: its link is named while the job runs");
    const std::string program = source_dir() + "/tests/faults/ddp_steps.py";
    auto r = run(hvrun_on(lab, home, {"-np", "3", "-H", names[0] + ":1," + names[1] + ":1," + names[2] + ":1",
                                      "--disable-cache", "--no-link-test", "-x", "OMP_NUM_THREADS=1", kTorchPython,
                                      program, "0", "0", "14"}),
                 180s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "DDP done") == 3);
    CHECK_THAT(r.err, Contains("hvrun: the network link of " + names[2] + " holds the job back: its connections (with "));
    CHECK_THAT(r.err, !Contains("holds the job back: busy") && !Contains("the network link of " + names[0]) &&
                          !Contains("the network link of " + names[1]));
  }
  {
    INFO("--no-link-test: nothing measured, nothing named");
    auto r = run(hvrun_on(lab, home, {"--no-link-test", "--check-only", "--json", "-H", hosts}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out).at("links").empty());
    CHECK_THAT(r.err, !Contains("degraded link"));
  }
}

TEST_CASE("link test: an elastic job's first world on a shaped lab has the shaped host named before its first worker",
          "[lab][link][elastic]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  SharedDir shared("elastic-link-test");
  const Discovery discovery(shared.dir);
  const auto names = lab.list("LAB_HOSTS");
  const auto fabric = lab.list("LAB_FABRIC_IFACES");
  REQUIRE(names.size() == 3);
  REQUIRE(fabric.size() == 3);
  discovery.set_hosts({names[0] + ":1", names[1] + ":1", names[2] + ":1"});
  REQUIRE(tc(Lab::default_prefix() + "-h2", fabric[2], "add") == 0);
  REQUIRE(tc(Lab::default_prefix() + "-sw", "h2-fab", "add") == 0);
  // Workers that print and end: the first world's three succeed, and so does the job.
  const auto elastic = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"-np", "3", "--min-np", "2", "--max-np", "3", "--host-discovery-script",
                               discovery.script, "--disable-cache"};
    a.insert(a.end(), extra.begin(), extra.end());
    for (const char* w : {"echo", "rank-says-hi"}) a.push_back(w);
    return merged(hvrun_on(lab, home, a));
  };
  {
    INFO("host 2 shaped: named with its figures, before the first worker's output");
    auto r = run(elastic({}), 60s);
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "rank-says-hi") == 3);
    check_named_first(r.out, names[2] + " " + fabric[2]);
  }
  {
    INFO("--no-link-test: nothing measured, nothing named");
    auto r = run(elastic({"--no-link-test"}), 60s);
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "rank-says-hi") == 3);
    CHECK_THAT(r.out, !Contains("degraded link") && !Contains("no link figure") && !Contains("MB/s"));
  }
}

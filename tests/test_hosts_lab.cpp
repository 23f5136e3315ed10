// Hosts as users have them, on a network-namespace lab: bytes that are not UTF-8 on remote ranks, the
// user's -x across hosts, and the other situations below. One lab for all of
// them: bringing a lab up costs more than the checks. Needs root; without it the cases say why they skip.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("hosts as users have them: bytes, -x, across lab hosts", "[lab][hosts]") {
  HVRUN_SKIP_WITHOUT_LAB();
  // Docker hosts: 40 container veths on docker0 per host, with only link-local addresses.
  Lab lab(3, Lab::default_prefix(), {"LAB_CONTAINER_VETHS=40"});
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string fabric1 = lab.list("LAB_FABRIC_IFACES").at(1);

  {
    INFO("bytes that are not UTF-8 (environment, argument, -x value, working directory) reach remote ranks exactly");
    const std::string e9("\xe9", 1), ff("\xff", 1);
    const fs::path dir = fs::temp_directory_path() / ("hvrun-bytes-" + e9 + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string script = "printf '%s|%s|%s|%s|' \"$1\" \"$HVRUN_TEST_BYTES\" \"$HVRUN_TEST_X\" \"$(pwd)\"";
    auto r = run(lab.on_host(0, {"/bin/sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", dir.string(), "/usr/bin/env",
                                 "HOME=" + home.dir.string(), "HVRUN_TEST_BYTES=caf" + e9, hvrun_bin(), "-p",
                                 lab.var("LAB_PORT"), "-i", lab.var("LAB_KEY"), "-H", "localhost," + h1 + "," + h2,
                                 "-x", "HVRUN_TEST_X=x" + ff, "sh", "-c", script, "sh", "arg" + e9 + ff}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    const std::string expected = "arg" + e9 + ff + "|caf" + e9 + "|x" + ff + "|" + dir.string() + "|";
    for (int rank = 0; rank < 3; ++rank) CHECK(count_of(r.out, "[" + std::to_string(rank) + "]<stdout>:" + expected) == 1);
    fs::remove_all(dir);
  }
  {
    INFO("the user's -x wins on remote ranks; a NIC unusable on some host is named in one line and still used");
    auto r = run(hvrun_on(lab, home, {"-H", h1 + "," + h2, "-x", "MASTER_PORT=29511", "-x",
                                      "NCCL_SOCKET_IFNAME=" + fabric1, "sh", "-c",
                                      "echo P=$MASTER_PORT N=$NCCL_SOCKET_IFNAME"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_of(r.out, "<stdout>:P=29511 N=" + fabric1 + "\n") == 2);
    // h1's fabric NIC is named differently on h2 (the lab's names differ per host).
    CHECK(count_of(r.err, "\n") == 1);
    CHECK_THAT(r.err, Catch::Contains("-x NCCL_SOCKET_IFNAME=" + fabric1 + " matches no usable NIC on " + h2 +
                                      " (usable there: ") &&
                          Catch::Contains("honoured as given"));
  }
  {
    INFO("one host under two names is refused before probing: exit 2, one line naming both entries and the fix");
    const std::string h1_addr = lab.list("LAB_FABRIC_ADDRS").at(1);
    auto r = run(hvrun_on(lab, home, {"--verbose", "-H", h1 + "," + h1_addr + ":2", "true"}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_of(r.err, "hvrun: error:") == 1);
    CHECK_THAT(r.err, Catch::Contains("hvrun: error: hosts '" + h1 + "' and '" + h1_addr + "' are one machine") &&
                          Catch::Contains("-H " + h1 + ":3"));
    CHECK(count_of(r.err, "probing") == 0);
  }
  {
    INFO("on a terminal the status line names the hosts still pending after 2 s");
    const std::string dropping = lab.list("LAB_DROP_ADDRS").at(2);  // h2's eth9: every packet dropped
    std::string line;
    for (const auto& a : hvrun_on(lab, home, {"--ssh-connect-timeout", "4", "-H", h1 + "," + dropping, "true"}))
      line += "'" + a + "' ";
    // script(1) gives hvrun a terminal, where the status line shows.
    auto r = run({"/usr/bin/script", "-qfec", line, "/dev/null"}, 60s);
    INFO(r.out << r.err);
    CHECK_THAT(r.out, Catch::Contains("connected 1/2, agents up 1/2; waiting for " + dropping + "\x1b[K"));
    CHECK_THAT(r.out, Catch::Contains(dropping + ": no answer from " + dropping));
  }
  {
    INFO("container veths (bridge ports, link-local only) are never probed; --check-only lists them in one line");
    auto r = run(hvrun_on(lab, home, {"--check-only", "--verbose", "-H", "localhost," + h1 + "," + h2}), 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    // The summary (without --verbose, which lists every NIC) says the reason once, naming a few.
    auto summary = run(hvrun_on(lab, home, {"--check-only", "-H", "localhost," + h1 + "," + h2}), 60s);
    INFO(summary.out << summary.err);
    CHECK(summary.exit_code == 0);
    CHECK_THAT(summary.out, Catch::Contains("  not considered: vethdk0, vethc[0-39]: a port of a bridge"));
    CHECK(count_of(summary.out, "vethc39") == 0);
    // Each host offers its fabric, docker0, wlp5s0 and eth9 (IPv4 and fd77::): 2 peers x 3 hosts x 5.
    CHECK_THAT(r.err, Catch::Contains("probing 30 addresses of 3 hosts"));
  }
  {
    INFO("a NIC that drops everything: given up after the bounded retries, the message says how many");
    auto r = run(hvrun_on(lab, home, {"--probe-timeout", "0.5", "--network-interface", "eth9", "-H", h1 + "," + h2,
                                      "true"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("no usable NIC on ") &&
                          Catch::Contains("gave up after 3 probe attempts (timeouts 0.5 s, 1 s, 2 s)"));
    CHECK(r.elapsed < 15s);
  }
}

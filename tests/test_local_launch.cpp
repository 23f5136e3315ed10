// End-to-end runs of the real hvrun binary on this host: the rank contract, failure propagation,
// signals, and that nothing is left running afterwards (found by a marker in the ranks' environment).
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/support/child_process.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;

namespace {
std::vector<std::string> hvrun_args(std::vector<std::string> args) {
  args.insert(args.begin(), hvrun_bin());
  return args;
}
}  // namespace

namespace {

// How many lines of `text` contain `needle`.
int count_lines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

}  // namespace

TEST_CASE("four local ranks each get the rank contract", "[integration]") {
  const std::string marker = unique_marker();
  auto r = run(hvrun_args({"-np", "4", "-H", "localhost:4", "-x", marker, "sh", "-c",
                           "echo R=$HVRUN_RANK S=$HVRUN_SIZE L=$HVRUN_LOCAL_RANK/$HVRUN_LOCAL_SIZE "
                           "C=$HVRUN_CROSS_RANK/$HVRUN_CROSS_SIZE T=$RANK/$WORLD_SIZE/$LOCAL_RANK "
                           "H=$HOROVOD_RANK I=$HVRUN_IFACE N=$NCCL_SOCKET_IFNAME M=$MASTER_ADDR:$MASTER_PORT "
                           "D=$(pwd)"}),
               30s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string cwd = std::filesystem::current_path().string();
  std::smatch m;
  std::string port;
  for (int rank = 0; rank < 4; ++rank) {
    const std::regex line("\\[" + std::to_string(rank) + "\\]<stdout>:R=" + std::to_string(rank) +
                          " S=4 L=" + std::to_string(rank) + "/4 C=0/1 T=" + std::to_string(rank) + "/4/" +
                          std::to_string(rank) + " H=" + std::to_string(rank) +
                          " I=lo N==lo M=127\\.0\\.0\\.1:(\\d+) D=(.*)\n");
    REQUIRE(std::regex_search(r.out, m, line));
    CHECK(m[2] == cwd);
    if (port.empty()) port = m[1];
    CHECK(m[1] == port);  // every rank agrees on MASTER_PORT
  }
  CHECK(std::stoi(port) > 0);
  CHECK(wait_until_gone(marker, 2s).empty());
}

TEST_CASE("a failing rank's exit code becomes hvrun's and the others are stopped at once", "[integration]") {
  const std::string marker = unique_marker();
  auto r = run(hvrun_args({"-np", "3", "-H", "localhost:3", "-x", marker, "sh", "-c",
                           "[ \"$HVRUN_RANK\" = 1 ] && { echo 'first words' >&2; echo 'dying now' >&2; exit 7; }; "
                           "sleep 60 & exec sleep 60"}),
               20s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 7);
  CHECK(r.elapsed < 5s);
  CHECK_THAT(r.err, Catch::Contains("rank 1 on localhost: exited with code 7"));
  CHECK_THAT(r.err, Catch::Contains("    first words\n    dying now"));
  CHECK_THAT(r.err, Catch::Contains("stopping the other 2 ranks"));
  // The background `sleep 60` of each rank is in the rank's process group and dies with it.
  CHECK(wait_until_gone(marker, 2s).empty());
}

TEST_CASE("a rank killed by a signal is reported by the signal's name", "[integration]") {
  const std::string marker = unique_marker();
  auto r = run(hvrun_args({"-np", "2", "-x", marker, "sh", "-c",
                           "[ \"$HVRUN_RANK\" = 0 ] && kill -SEGV $$; exec sleep 60"}),
               20s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 128 + SIGSEGV);
  CHECK_THAT(r.err, Catch::Contains("rank 0 on localhost: killed by SIGSEGV"));
  CHECK(wait_until_gone(marker, 2s).empty());
}

TEST_CASE("without a writable TMPDIR the ranks run without the crash handler, and the agent says so once",
          "[integration]") {
  const std::string marker = unique_marker();
  auto r = run(hvrun_args({"-np", "2", "-x", marker, "sh", "-c", "echo preload=$LD_PRELOAD"}), 20s,
               {"TMPDIR=/nonexistent-hvrun-tmp"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(count_lines(r.err, "mkdtemp failed (/nonexistent-hvrun-tmp/hvrun-agent.XXXXXX, for hvrun's crash handler; set "
                           "TMPDIR to a writable directory on this host): No such file or directory; the ranks run "
                           "without hvrun's crash handler (no native stacks, no hang autopsy)") == 1);
  CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:preload=\n"));
  CHECK(wait_until_gone(marker, 2s).empty());
}

TEST_CASE("the crash handler is preloaded, after it the user's LD_PRELOAD, and HVRUN_CRASH_HANDLER=0 turns it off",
          "[integration]") {
  auto on = run(hvrun_args({"-np", "1", "-x", "LD_PRELOAD=", "sh", "-c", "echo preload=$LD_PRELOAD stacks=$HVRUN_STACK_DIR"}),
                20s);
  INFO(on.out << on.err);
  CHECK(on.exit_code == 0);
  CHECK_THAT(on.out, Catch::Matches("[\\s\\S]*preload=/[^ ]*/hvrun-agent\\.[^/ ]+/libhvrun_crash\\.so stacks=/[^ ]*/stacks\n"));
  auto off = run(hvrun_args({"-np", "1", "-x", "HVRUN_CRASH_HANDLER=0", "sh", "-c", "echo preload=$LD_PRELOAD."}), 20s);
  CHECK(off.exit_code == 0);
  CHECK_THAT(off.out, Catch::Contains("[0]<stdout>:preload=."));
}

TEST_CASE("a command not on PATH is refused before any rank starts, exit 2, naming host and command",
          "[integration]") {
  auto r = run(hvrun_args({"-np", "2", "hvrun-no-such-command-xyz", "arg"}), 20s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("hvrun: error: localhost: 'hvrun-no-such-command-xyz' is not on the ranks' PATH "
                                    "there; install it there, or give its full path"));
}

TEST_CASE("Ctrl-C and SIGTERM stop every rank and exit 130 and 143", "[integration]") {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string marker = unique_marker();
    ChildProcess p(hvrun_args({"-np", "3", "-x", marker, "sh", "-c",
                               "trap 'echo got-term >&2; exit 1' TERM; echo ready; while :; do sleep 0.1; done"}));
    REQUIRE(p.wait_for_stdout("<stdout>:ready", 3, 20s));
    p.signal(sig);
    auto r = p.wait(10s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 128 + sig);
    CHECK_THAT(r.err, Catch::Contains(sig == SIGINT ? "received SIGINT" : "received SIGTERM"));
    CHECK_THAT(r.err, Catch::Contains("got-term"));  // the ranks saw SIGTERM first, so they could clean up
    CHECK(wait_until_gone(marker, 2s).empty());
  }
}

TEST_CASE("a rank that ignores SIGTERM is killed after --kill-grace", "[integration]") {
  const std::string marker = unique_marker();
  ChildProcess p(hvrun_args({"-np", "2", "--kill-grace", "0.5", "-x", marker, "sh", "-c",
                             "trap '' TERM; echo ready; while :; do sleep 0.1; done"}));
  REQUIRE(p.wait_for_stdout("<stdout>:ready", 2, 20s));
  p.signal(SIGINT);
  auto r = p.wait(10s);
  CHECK(r.exit_code == 130);
  CHECK(r.elapsed < 10s);
  CHECK(wait_until_gone(marker, 2s).empty());
}

TEST_CASE("hvrun killed by SIGKILL leaves no rank running", "[integration]") {
  const std::string marker = unique_marker();
  ChildProcess p(hvrun_args({"-np", "4", "-x", marker, "sh", "-c", "sleep 60 & echo ready; exec sleep 60"}));
  REQUIRE(p.wait_for_stdout("<stdout>:ready", 4, 20s));
  REQUIRE(wait_for_marker_count(marker, 8, 5s) >= 8);
  p.signal(SIGKILL);
  p.wait(5s);
  const auto left = wait_until_gone(marker, 2s);
  CHECK(left.empty());
}

TEST_CASE("output keeps its lines: a carriage return, a last line without newline, files per rank", "[integration]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hvrun-out-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto r = run(hvrun_args({"-np", "2", "--output-filename", dir.string(), "sh", "-c",
                           "printf '10%%\\r100%%\\n'; printf 'to err' >&2; printf 'no newline'"}),
               20s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    // Ranks interleave with each other; each rank's own lines keep their order.
    const std::string p = "[" + std::to_string(rank) + "]<stdout>:";
    std::string own;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(p, 0) == 0) own += line.substr(p.size()) + "\n";
    CHECK(own == "10%\n100%\nno newline\n");
    CHECK_THAT(r.err, Catch::Contains("[" + std::to_string(rank) + "]<stderr>:to err\n"));
    std::ifstream f(dir / ("rank." + std::to_string(rank)) / "stdout");
    std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(content == "10%\r100%\nno newline");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("dry run: --dry-run prints the plan and each rank's environment and starts nothing", "[integration]") {
  const std::string marker = unique_marker();
  auto r = run(hvrun_args({"--dry-run", "-np", "3", "-H", "localhost:2,127.0.0.1:2", "-x", marker, "sh", "-c",
                           "touch /tmp/hvrun-dry-run-must-not-exist"}),
               20s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("host localhost: slots 2, ranks 0-1"));
  CHECK_THAT(r.out, Catch::Contains("host 127.0.0.1: slots 2, ranks 2-2"));
  CHECK_THAT(r.out, Catch::Contains("[2] HVRUN_CROSS_RANK=1"));
  CHECK_THAT(r.out, Catch::Contains("[1] HVRUN_LOCAL_RANK=1"));
  CHECK_FALSE(std::filesystem::exists("/tmp/hvrun-dry-run-must-not-exist"));
}

TEST_CASE("two local host entries run as two hosts with cross ranks", "[integration]") {
  auto r = run(hvrun_args({"-H", "localhost:2,127.0.0.1:1", "sh", "-c",
                           "echo X=$HVRUN_CROSS_RANK/$HVRUN_CROSS_SIZE G=$GROUP_RANK"}),
               20s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:X=0/2 G=0"));
  CHECK_THAT(r.out, Catch::Contains("[1]<stdout>:X=0/1 G=0"));
  CHECK_THAT(r.out, Catch::Contains("[2]<stdout>:X=1/2 G=1"));
}

TEST_CASE("usage errors exit 2 with one line", "[integration]") {
  for (auto args : std::vector<std::vector<std::string>>{
           {"-H", "a:0", "true"}, {"-np", "2"}, {"-p", "70000", "-H", "a", "true"}, {"--no-such-flag", "true"}}) {
    auto r = run(hvrun_args(args), 10s);
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::StartsWith("hvrun: error: "));
  }
}

TEST_CASE("this machine's own hostname runs through a local agent, without SSH", "[integration]") {
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  auto r = run(hvrun_args({"-H", std::string(name) + ":2", "sh", "-c", "echo on=$HVRUN_HOSTNAME"}), 20s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[1]<stdout>:on=" + std::string(name)));
}

TEST_CASE("oversubscription: -np above the slots warns once and spreads ranks in proportion", "[integration]") {
  auto r = run(hvrun_args({"-np", "6", "-H", "localhost:2,127.0.0.1:1", "sh", "-c",
                           "echo L=$HVRUN_LOCAL_RANK/$HVRUN_LOCAL_SIZE"}),
               20s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains("-np 6 exceeds the 3 slots"));
  CHECK_THAT(r.out, Catch::Contains("[3]<stdout>:L=3/4"));
  CHECK_THAT(r.out, Catch::Contains("[5]<stdout>:L=1/2"));
  auto strict = run(hvrun_args({"--no-oversubscribe", "-np", "6", "-H", "localhost:2,127.0.0.1:1", "true"}), 20s);
  CHECK(strict.exit_code == 2);
  CHECK_THAT(strict.err, Catch::Contains("6") && Catch::Contains("3"));
}

TEST_CASE("the user's -x wins over the rank contract, and a NIC no host can use is named once, still honoured",
          "[integration]") {
  auto r = run(hvrun_args({"-H", "localhost:2", "-x", "MASTER_PORT=29500", "-x", "NCCL_SOCKET_IFNAME=enp", "-x",
                           "RANK=user", "sh", "-c", "echo P=$MASTER_PORT N=$NCCL_SOCKET_IFNAME R=$RANK L=$LOCAL_RANK"}),
               20s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:P=29500 N=enp R=user L=0"));
  CHECK_THAT(r.out, Catch::Contains("[1]<stdout>:P=29500 N=enp R=user L=1"));
  // One line: this machine's candidates are all usable on a single host (lo and whatever else it has).
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::StartsWith("hvrun: -x NCCL_SOCKET_IFNAME=enp matches no usable NIC on localhost (usable "
                                      "there: lo") &&
                        Catch::EndsWith("); honoured as given, ranks there may fail to connect\n"));

  auto dry = run(hvrun_args({"--dry-run", "-H", "localhost", "-x", "MASTER_PORT=29500", "true"}), 20s);
  CHECK_THAT(dry.out, Catch::Contains("[0] MASTER_PORT=29500\n"));
}

TEST_CASE("bytes that are not UTF-8 in hvrun's environment, an argument, a -x value and the working directory "
          "reach local ranks exactly",
          "[integration]") {
  const std::string e9("\xe9", 1), ff("\xff", 1);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("hvrun-bytes-" + e9 + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string script = "printf '%s|%s|%s|%s|' \"$1\" \"$HVRUN_TEST_BYTES\" \"$HVRUN_TEST_X\" \"$(pwd)\"";
  auto r = run({"/bin/sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", dir.string(), hvrun_bin(), "-H",
                "localhost:2", "-x", "HVRUN_TEST_X=x" + ff, "sh", "-c", script, "sh", "arg" + e9 + ff},
               20s, {"HVRUN_TEST_BYTES=caf" + e9});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  const std::string expected = "arg" + e9 + ff + "|caf" + e9 + "|x" + ff + "|" + dir.string() + "|";
  CHECK_THAT(r.out, Catch::Contains("[0]<stdout>:" + expected) && Catch::Contains("[1]<stdout>:" + expected));
  std::filesystem::remove_all(dir);
}

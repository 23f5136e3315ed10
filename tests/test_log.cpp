// hvrun's own logging (common/log.hpp, launcher/cli/log_choice.hpp): the threshold decided from
// --verbose and --hvrun-log-level, subsystem lists, the prefix written by the pattern, and the same seen
// end to end from the real hvrun binary. The options' parsing: test_launch_options.cpp.
#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "launcher/cli/log_choice.hpp"
#include "tests/support/child_process.hpp"

using hvrun::LogLevel;
using hvrun::LogSubsys;
using hvrun::LogSubsysSet;
using Args = std::vector<std::string>;
using namespace std::chrono_literals;

namespace {

LogSubsysSet only(std::initializer_list<LogSubsys> subsystems) {
  LogSubsysSet set;
  for (LogSubsys s : subsystems) set.set(static_cast<std::size_t>(s));
  return set;
}

// Sends every hvrun logger to a string for the test's lifetime, then back to stderr.
class CapturedLog {
 public:
  explicit CapturedLog(std::string_view prefix = hvrun::kHvrunLogPrefix) {
    hvrun::init_log(prefix, [this] { return std::make_shared<spdlog::sinks::ostream_sink_st>(out_); });
  }
  ~CapturedLog() {
    hvrun::init_log(hvrun::kHvrunLogPrefix);
    hvrun::set_log_threshold(LogLevel::info, hvrun::all_log_subsystems());
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

TEST_CASE("an explicit --hvrun-log-level wins over --verbose; --verbose alone means info", "[log]") {
  CHECK(hvrun::choose_log_level(false, std::nullopt) == LogLevel::warn);
  CHECK(hvrun::choose_log_level(true, std::nullopt) == LogLevel::info);
  CHECK(hvrun::choose_log_level(true, LogLevel::debug) == LogLevel::debug);
  CHECK(hvrun::choose_log_level(true, LogLevel::err) == LogLevel::err);
  CHECK(hvrun::choose_log_level(false, LogLevel::trace) == LogLevel::trace);
}

TEST_CASE("subsystem lists: names, all, ^ for all but those; anything else names the valid ones", "[log]") {
  using hvrun::parse_log_subsys;
  CHECK(parse_log_subsys("ssh,nic", "f") == only({LogSubsys::kSsh, LogSubsys::kNic}));
  CHECK(parse_log_subsys("rendezvous", "f") == only({LogSubsys::kRendezvous}));
  CHECK(parse_log_subsys("all", "f") == hvrun::all_log_subsystems());
  CHECK(parse_log_subsys("^store,output", "f") == ~only({LogSubsys::kStore, LogSubsys::kOutput}));
  CHECK(parse_log_subsys("^all", "f").none());
  CHECK(hvrun::log_subsys_names() == "ssh, start, nic, rank, output, proc, store, rendezvous");
  CHECK_THROWS_AS(parse_log_subsys("ssh,x", "f"), hvrun::UsageError);
  CHECK_THROWS_WITH(parse_log_subsys("ssh,x", "--flag"),
                    Catch::StartsWith("--flag: unknown subsystem 'x'; give a comma list of ssh, start,"));
}

TEST_CASE("log lines read prefix + text; a subsystem's debug lines print only when it is selected", "[log]") {
  CapturedLog log;
  hvrun::set_log_threshold(LogLevel::debug, only({LogSubsys::kSsh}));
  hvrun::log_of(LogSubsys::kSsh).debug("a: connected to {} port {}", "10.0.0.2", 22);
  hvrun::log_of(LogSubsys::kNic).debug("not selected: not printed");
  hvrun::log_of(LogSubsys::kNic).trace("below the threshold: not printed");
  hvrun::log_of(LogSubsys::kNic).info("b uses eth0 10.0.0.2 (reached by 3 peers)");
  hvrun::log_of(LogSubsys::kStore).warn("store: refused a connection from 10.0.0.9:4000: wrong token");
  spdlog::debug("no subsystem: the threshold alone");
  spdlog::error("cannot start the job on 1 of 2 hosts:\n    b: connection refused");
  hvrun::log_report(LogLevel::err, "hvrun: rank 2 on b: killed by SIGKILL\nhvrun: stopping the other 1 ranks");
  CHECK(log.text() ==
        "hvrun: a: connected to 10.0.0.2 port 22\n"
        "hvrun: b uses eth0 10.0.0.2 (reached by 3 peers)\n"
        "hvrun: store: refused a connection from 10.0.0.9:4000: wrong token\n"
        "hvrun: no subsystem: the threshold alone\n"
        "hvrun: cannot start the job on 1 of 2 hosts:\n    b: connection refused\n"
        "hvrun: rank 2 on b: killed by SIGKILL\nhvrun: stopping the other 1 ranks\n");
}

TEST_CASE("the threshold holds for every logger; warn and error print whatever the selection", "[log]") {
  CapturedLog log("hvrun-agent: ");
  hvrun::set_log_threshold(LogLevel::warn, LogSubsysSet());
  hvrun::log_of(LogSubsys::kRank).info("below warn: not printed");
  hvrun::log_of(LogSubsys::kRank).warn("rank 3: kill failed");
  spdlog::info("below warn: not printed");
  hvrun::log_report(LogLevel::info, "hvrun: timings: not printed");
  hvrun::log_of(LogSubsys::kRendezvous).error("one");
  hvrun::set_log_threshold(LogLevel::off, hvrun::all_log_subsystems());
  hvrun::log_of(LogSubsys::kRendezvous).error("off: not printed");
  spdlog::error("off: not printed");
  CHECK(log.text() == "hvrun-agent: rank 3: kill failed\nhvrun-agent: one\n");
}

TEST_CASE("an unexpected exception's message names hvrun's own log flag; its text is logged at debug", "[log]") {
  CapturedLog log;
  hvrun::set_log_threshold(LogLevel::debug, LogSubsysSet());
  const std::string said = hvrun::user_message(std::runtime_error("[json.exception.type_error.316] bad"), "testing");
  CHECK(said == "unexpected failure while testing (an hvrun bug; --hvrun-log-level debug shows the details)");
  CHECK(log.text() == "hvrun: unexpected exception while testing: [json.exception.type_error.316] bad\n");
}

TEST_CASE("hvrun --verbose --hvrun-log-level debug prints debug lines, of the selected subsystems only",
          "[integration]") {
  const std::string pid_line = "hvrun: rank 0 on localhost is pid ";
  const std::string started = "hvrun: started 1 ranks on 1 hosts\n";
  auto run_hvrun = [](Args args) {
    const std::string marker = hvrun::test::unique_marker();
    args.insert(args.begin(), {hvrun::test::hvrun_bin(), "-x", marker, "-np", "1"});
    args.push_back("true");
    const auto r = hvrun::test::run(args, 30s);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(hvrun::test::wait_until_gone(marker, 2s).empty());
    return r.err;
  };
  const std::string debug_verbose = run_hvrun({"--verbose", "--hvrun-log-level", "debug"});
  CHECK_THAT(debug_verbose, Catch::Contains(pid_line) && Catch::Contains(started));
  CHECK_THAT(run_hvrun({"--hvrun-log-level", "debug", "--verbose"}), Catch::Contains(pid_line));
  const std::string verbose = run_hvrun({"--verbose"});
  CHECK_THAT(verbose, Catch::Contains(started) && !Catch::Contains(pid_line));
  const std::string ssh_only = run_hvrun({"--hvrun-log-level", "debug", "--hvrun-log-subsys", "ssh"});
  CHECK_THAT(ssh_only, Catch::Contains(started) && !Catch::Contains(pid_line));
  CHECK_THAT(run_hvrun({"--hvrun-log-level", "debug", "--hvrun-log-subsys", "rank"}), Catch::Contains(pid_line));
  // Every line hvrun itself printed starts with its prefix.
  std::istringstream lines(debug_verbose);
  for (std::string line; std::getline(lines, line);) {
    CAPTURE(line);
    CHECK((line.rfind("hvrun: ", 0) == 0 || line.rfind("    ", 0) == 0));
  }
}

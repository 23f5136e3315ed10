// Issue 40: --events' JSON lines (the schema README documents) and the ranks' table at the end.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <pty.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "common/unique_fd.hpp"
#include "launcher/job/job_record.hpp"
#include "tests/sshd_fixture.hpp"

using hvrun::ExitedMsg;
using hvrun::JobRecord;
using hvrun::ObservationMsg;
using hvrun::RankObservation;
using hvrun::StragglerWatch;
using hvrun::testing::TempDir;

namespace {

std::vector<nlohmann::json> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The keys each kind of line carries besides time, t and event (README, "--events").
const std::map<std::string, std::set<std::string>> kSchema = {
    {"job_start", {"policy", "np", "hosts", "command"}},
    {"rank_start", {"rank", "host", "pid"}},
    {"observation", {"host", "window_s", "ranks"}},
    {"straggler", {"rank", "host", "cause", "text"}},
    {"straggler_recovered", {"rank", "host", "cause", "text"}},
    {"rank_exit", {"rank", "host", "exit_code", "signal", "cpu_s", "peak_rss_kb"}},
    {"restart", {"why", "restart", "of"}},
    {"job_end", {"exit_code"}},
};

}  // namespace

TEST_CASE("--events: every line is one JSON object with its time, its kind and that kind's fields") {
  TempDir tmp;
  const auto path = tmp.path() / "events.jsonl";
  {
    JobRecord record(path.string(), /*table=*/true, /*status_fd=*/-1);
    record.event("job_start", {{"policy", "fixed"}, {"np", 2}, {"hosts", {"a", "b"}}, {"command", {"./train"}}});
    record.rank_started(0, "a", 100);
    record.rank_started(1, "b", 200);
    ObservationMsg m;
    m.window_ms = 2000;
    m.ranks = {RankObservation{0, 900, 0, 50, 50, 250, 1800, 4096, 0, "", 0, "", -1, 0}};
    record.observed("a", m);
    m.ranks = {RankObservation{1, 100, 0, 880, 20, 0, 210, 8192, 90000, "10.0.0.1", 0, "", -1, 0}};
    record.observed("b", m);
    record.straggler({false, 0, "a", StragglerWatch::Cause::kStarved, "rank 0 on a holds the job back"});
    record.event("restart", {{"why", "rank 1 on b exited with 1"}, {"restart", 1}, {"of", 3}});
    record.rank_exited(1, "b", ExitedMsg{1, 0, 0, "", "", 9000, 2500});
    record.ended(0);

    const std::string table = record.table();
    INFO(table);
    // Grouped by host, one line per rank: wall, CPU (wait4's at the exit), waiting share, peak RSS, exit.
    CHECK(std::regex_search(table, std::regex(R"(host +rank +wall +CPU +waiting +peak RSS +exit)")));
    CHECK(std::regex_search(table, std::regex(R"(\ba +0 +[0-9.]+ s +1\.8 s +5 % +4 MiB +running)")));
    CHECK(std::regex_search(table, std::regex(R"(\bb +1 +[0-9.]+ s +2\.5 s +88 % +9 MiB +0)")));
  }
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 9);
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  double last_t = 0;
  for (const auto& l : lines) {
    INFO(l.dump());
    REQUIRE(l.is_object());
    CHECK(std::regex_match(l.at("time").get<std::string>(), iso));
    CHECK(l.at("t").get<double>() >= last_t);
    last_t = l.at("t").get<double>();
    const auto kind = l.at("event").get<std::string>();
    REQUIRE(kSchema.count(kind) == 1);
    for (const auto& key : kSchema.at(kind)) CHECK(l.contains(key));
  }
  CHECK(lines[0]["event"] == "job_start");
  CHECK(lines[3]["event"] == "observation");
  CHECK(lines[3]["ranks"][0]["busy"] == 0.9);
  CHECK(lines[3]["ranks"][0]["cpu_limit"] == 0.25);
  CHECK(lines[3]["ranks"][0]["cpu_s"] == 1.8);
  CHECK(lines[3]["ranks"][0]["rss_kb"] == 4096);
  CHECK(lines[5]["cause"] == "starved");
  CHECK(lines[7]["event"] == "rank_exit");
  CHECK(lines[7]["cpu_s"] == 2.5);
  CHECK(lines.back()["event"] == "job_end");
}

TEST_CASE("--events: a file in a directory others may write in is refused, naming the flag") {
  TempDir tmp;
  const auto open_dir = tmp.path() / "open";
  std::filesystem::create_directory(open_dir);
  REQUIRE(::chmod(open_dir.c_str(), 0777) == 0);
  try {
    JobRecord record((open_dir / "events.jsonl").string(), false, -1);
    FAIL("no refusal");
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Catch::Contains("--events") && Catch::Contains(open_dir.string()));
  }
  CHECK_FALSE(std::filesystem::exists(open_dir / "events.jsonl"));
}

namespace {

// What the terminal's other end has received so far (the pty's master, non-blocking read).
std::string terminal_text(int master) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("status line: on a terminal, the ranks running, their shares and the rank that waits least, drawn in "
          "place, erased before a log line and at the end; nothing where it is not a terminal") {
  int master = -1, slave = -1;
  REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  const hvrun::UniqueFd master_fd(master), slave_fd(slave);
  REQUIRE(::fcntl(master, F_SETFL, O_NONBLOCK) == 0);
  JobRecord record("", false, slave);
  record.rank_started(0, "a", 100);
  record.rank_started(1, "b", 200);
  ObservationMsg m;
  m.window_ms = 2000;
  m.ranks = {RankObservation{0, 100, 0, 850, 50, 0, 200, 4096, 0, "", 0, "", -1, 0},
             RankObservation{1, 900, 0, 50, 50, 0, 1800, 4096, 0, "", 0, "", -1, 0}};
  record.observed("a", m);
  CHECK(terminal_text(master) ==
        "\r2 ranks running, busy 50 %, waiting on peers 45 %; waits least: rank 1 on b (5 %)\x1b[K");
  hvrun::log_report(hvrun::LogLevel::warn, "hvrun: a line of its own");  // to stderr: the line steps aside first
  CHECK(terminal_text(master) == "\r\x1b[K");
  record.rank_exited(1, "b", ExitedMsg{1, 0, 0, "", "", 0, 0});
  CHECK(terminal_text(master) == "\r1 rank running, busy 10 %, waiting on peers 85 %\x1b[K");
  record.ended(0);
  CHECK(terminal_text(master) == "\r\x1b[K");
  hvrun::log_report(hvrun::LogLevel::warn, "hvrun: after the end");  // the hook is gone: nothing more here
  CHECK(terminal_text(master).empty());

  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_NONBLOCK) == 0);
  const hvrun::UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  JobRecord piped("", false, pipe_fds[1]);
  piped.rank_started(0, "a", 100);
  piped.observed("a", m);
  CHECK(terminal_text(pipe_fds[0]).empty());
}

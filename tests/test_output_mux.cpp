#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "common/error.hpp"
#include "launcher/output/output_mux.hpp"
#include "tests/support/file_text.hpp"

using namespace hvrun;
using namespace std::chrono_literals;

using hvrun::test::slurp;

namespace {
// Captures what the mux writes to "stdout" and "stderr" through pipes.
struct Capture {
  int out[2], err[2];
  Capture() {
    REQUIRE(::pipe(out) == 0);
    REQUIRE(::pipe(err) == 0);
  }
  ~Capture() {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
  }
  static std::string drain(int fd) {
    std::string s;
    char buf[4096];
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }
};
}  // namespace

TEST_CASE("output lines get rank and stream prefixes and never mix", "[output]") {
  Capture c;
  OutputMux mux(3, OutputOptions{"", false, c.out[1], c.err[1], 10});
  mux.write(0, OutputStream::kStdout, "hel");
  mux.write(2, OutputStream::kStdout, "other\n");
  mux.write(0, OutputStream::kStdout, "lo\npartial");
  mux.write(1, OutputStream::kStderr, "oops\r\n");
  mux.flush(0);
  REQUIRE(mux.drain(5s));
  CHECK(Capture::drain(c.out[0]) == "[2]<stdout>:other\n[0]<stdout>:hello\n[0]<stdout>:partial\n");
  CHECK(Capture::drain(c.err[0]) == "[1]<stderr>:oops\n");
}

TEST_CASE("the last ten stderr lines of each rank are kept", "[output]") {
  Capture c;
  OutputMux mux(2, OutputOptions{"", false, c.out[1], c.err[1], 10});
  for (int i = 0; i < 25; ++i) mux.write(1, OutputStream::kStderr, "line " + std::to_string(i) + "\n");
  mux.write(1, OutputStream::kStdout, "not stderr\n");
  const auto& tail = mux.last_stderr(1);
  REQUIRE(tail.size() == 10);
  CHECK(tail.front() == "line 15");
  CHECK(tail.back() == "line 24");
  CHECK(mux.last_stderr(0).empty());
  REQUIRE(mux.drain(5s));
  Capture::drain(c.err[0]);
}

TEST_CASE("timestamps prefix lines in ISO 8601", "[output]") {
  Capture c;
  OutputMux mux(1, OutputOptions{"", true, c.out[1], c.err[1], 10});
  mux.write(0, OutputStream::kStdout, "x\n");
  REQUIRE(mux.drain(5s));
  const std::string got = Capture::drain(c.out[0]);
  CHECK(std::regex_match(got, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\[0\]<stdout>:x\n)")));
}

TEST_CASE("--output-filename writes each rank's raw streams to DIR/rank.N", "[output]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hvrun-mux-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    Capture c;
    OutputMux mux(2, OutputOptions{dir.string(), false, c.out[1], c.err[1], 10});
    mux.write(1, OutputStream::kStdout, "a\rb\n");
    mux.write(1, OutputStream::kStderr, "err");
    REQUIRE(mux.drain(5s));
    Capture::drain(c.out[0]);
  }
  CHECK(slurp(dir / "rank.1" / "stdout") == "a\rb\n");
  CHECK(slurp(dir / "rank.1" / "stderr") == "err");
  CHECK(std::filesystem::exists(dir / "rank.0" / "stdout"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("an output directory that cannot be made names the flag", "[output]") {
  REQUIRE_THROWS_WITH(OutputMux(1, OutputOptions{"/proc/hvrun-cannot-write/x", false, 1, 2, 10}),
                      Catch::Contains("--output-filename") && Catch::Contains("/proc/hvrun-cannot-write"));
}

TEST_CASE("--log-dir: each attempt's files in torchrun's layout, the console filtered, the host in the prefix",
          "[output][torchrun]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hvrun-mux-logs-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  RankLogOptions logs;
  logs.dir = dir.string();
  logs.tee = StreamSpec::parse("3", "--tee");
  logs.local_ranks = {0};
  logs.prefix_host = true;
  std::string run;
  {
    Capture c;
    OutputMux mux(2, OutputOptions{"", false, c.out[1], c.err[1], 10}, {}, RankLogs(logs, "job7"));
    run = mux.log_run_dir();
    mux.place(0, 0, "a", 0);
    mux.place(1, 1, "a", 0);
    mux.write(0, OutputStream::kStdout, "zero\n");
    mux.write(1, OutputStream::kStdout, "one\n");
    mux.write(1, OutputStream::kStderr, "one's error\n");
    mux.flush(1);
    mux.restart(1);
    mux.place(1, 0, "b", 1);  // the restart moved rank 1 to b's local rank 0
    mux.write(1, OutputStream::kStdout, "again\n");
    REQUIRE(mux.drain(5s));
    CHECK(Capture::drain(c.out[0]) == "[0@a]<stdout>:zero\n[1@b]<stdout>:again\n");
    CHECK(Capture::drain(c.err[0]).empty());  // local rank 1's stderr is filtered from the console
    CHECK(mux.last_stderr(1).empty());        // (forgotten by the restart, kept until it)
  }
  CHECK(slurp(run + "/attempt_0/a/0/stdout.log") == "zero\n");
  CHECK(slurp(run + "/attempt_0/a/1/stdout.log") == "one\n");
  CHECK(slurp(run + "/attempt_0/a/1/stderr.log") == "one's error\n");
  CHECK(slurp(run + "/attempt_1/b/0/stdout.log") == "again\n");
  std::filesystem::remove_all(dir);
}

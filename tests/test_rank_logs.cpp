// torchrun's --redirects/--tee values, --local-ranks-filter and hvrun's --ranks-filter, and where each
// rank's output goes under --log-dir (launcher/output/rank_logs.hpp); the files themselves are
// test_output_mux.cpp's.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "common/error.hpp"
#include "launcher/output/rank_logs.hpp"

using hvrun::RankLogOptions;
using hvrun::RankLogs;
using hvrun::StreamSpec;

TEST_CASE("torchrun's stream specs: 0-3 for every local rank, or per local rank", "[output][torchrun]") {
  const auto three = StreamSpec::parse("3", "--tee");
  CHECK((three.out(0) && three.err(0) && three.out(7) && three.err(7)));
  const auto one = StreamSpec::parse("1", "--tee");
  CHECK((one.out(2) && !one.err(2)));
  const auto mapped = StreamSpec::parse("0:1,1:2", "--redirects");
  CHECK((mapped.out(0) && !mapped.err(0)));
  CHECK((!mapped.out(1) && mapped.err(1)));
  CHECK((!mapped.out(2) && !mapped.err(2)));
  CHECK(mapped.any());
  CHECK_FALSE(StreamSpec::parse("0", "--tee").any());
  CHECK_FALSE(StreamSpec().any());
  for (const char* bad : {"4", "x", "", "0:", ":1", "0:4", "0:1,0:2", "-1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(StreamSpec::parse(bad, "--redirects"),
                      Catch::StartsWith("--redirects: '" + std::string(bad) + "' is not 0-3"));
  }
  CHECK(hvrun::parse_rank_list("0,2,2", "--local-ranks-filter") == std::set<int>{0, 2});
  CHECK_THROWS_WITH(hvrun::parse_rank_list("0,a", "--ranks-filter"), Catch::StartsWith("--ranks-filter: '0,a'"));
}

TEST_CASE("where a rank's output goes: files in torchrun's layout with the host, the console filtered",
          "[output][torchrun]") {
  const auto base = std::filesystem::temp_directory_path() / ("hvrun-logs-" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  RankLogOptions o;
  o.dir = base.string();
  o.tee = StreamSpec::parse("3", "--tee");
  o.local_ranks = {0};
  o.ranks = {0, 1, 2};
  {
    const RankLogs logs(o, "job/7");
    REQUIRE_THAT(logs.run_dir(), Catch::StartsWith(base.string() + "/job_7_"));
    CHECK(std::filesystem::is_directory(logs.run_dir()));
    const auto r = logs.route(2, 0, "node2", 1);
    CHECK(r.out_file == logs.run_dir() + "/attempt_1/node2/0/stdout.log");
    CHECK(r.err_file == logs.run_dir() + "/attempt_1/node2/0/stderr.log");
    CHECK((r.console_out && r.console_err));
    CHECK(r.label == "2");
    const auto filtered_local = logs.route(1, 1, "node1", 0);
    CHECK((!filtered_local.console_out && !filtered_local.console_err));
    CHECK_FALSE(filtered_local.out_file.empty());  // the files keep every rank
    const auto filtered_global = logs.route(4, 0, "node3", 0);
    CHECK(!filtered_global.console_out);
    const RankLogs again(o, "job/7");
    CHECK(again.run_dir() != logs.run_dir());  // each run a directory of its own, as torchrun's mkdtemp
  }
  SECTION("--redirects: the file instead of the console; --log-dir alone keeps both streams") {
    o.tee = {};
    o.local_ranks.clear();
    o.ranks.clear();
    o.redirects = StreamSpec::parse("0:1", "--redirects");
    const auto r0 = RankLogs(o, "r").route(0, 0, "a", 0);
    CHECK((!r0.console_out && r0.console_err));
    CHECK((!r0.out_file.empty() && r0.err_file.empty()));
    const auto r1 = RankLogs(o, "r").route(1, 1, "a", 0);
    CHECK((r1.console_out && r1.out_file.empty()));
    o.redirects = {};
    const auto plain = RankLogs(o, "r").route(1, 1, "a", 0);
    CHECK((plain.console_out && plain.console_err && !plain.out_file.empty() && !plain.err_file.empty()));
  }
  SECTION("no files asked for: no directory; the host in the prefix on request") {
    o = {};
    o.prefix_host = true;
    const RankLogs logs(o, "r");
    CHECK(logs.run_dir().empty());
    const auto r = logs.route(3, 1, "node2", 0);
    CHECK(r.label == "3@node2");
    CHECK(r.out_file.empty());
  }
  std::filesystem::remove_all(base);
  CHECK_THROWS_WITH(RankLogs(RankLogOptions{"/proc/hvrun-no/x", {}, {}, {}, {}, false}, "r"),
                    Catch::StartsWith("--log-dir: cannot create directory '/proc/hvrun-no/x'"));
}

// hvrun-allreduce-bench and the C example as real processes: started by hand with the rank contract
// (a store served by this test), and under hvrun. Until hvrun serves the store itself, the test hands
// its store to the ranks with -x HVRUN_STORE_*; once hvrun sets those, its own values take over.
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/served_store.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;

namespace {

std::string bench_bin() { return std::string(build().collectives_bin_dir) + "/hvrun-allreduce-bench"; }
std::string c_example_bin() { return std::string(build().collectives_bin_dir) + "/hvrun-collectives-c-example"; }

std::vector<std::string> rank_env(const ServedStore& served, int rank, int size) {
  std::vector<std::string> env = served.env();
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"HVRUN_RANK", std::to_string(rank)},
           {"HVRUN_SIZE", std::to_string(size)},
           {"HVRUN_LOCAL_RANK", std::to_string(rank)},
           {"HVRUN_LOCAL_SIZE", std::to_string(size)},
           {"HVRUN_IFACE", "lo"},
           {"HVRUN_ADDR", "127.0.0.1"}})
    env.push_back(k + "=" + v);
  return env;
}

// Starts `size` ranks of argv by hand and waits for all; results by rank.
std::vector<ChildResult> run_by_hand(const ServedStore& served, int size, const std::vector<std::vector<std::string>>& argvs) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int r = 0; r < size; ++r)
    children.push_back(std::make_unique<ChildProcess>(argvs[static_cast<std::size_t>(r) % argvs.size()],
                                                      rank_env(served, r, size)));
  std::vector<ChildResult> results;
  for (auto& c : children) results.push_back(c->wait(60s));
  return results;
}

// The table's rows (with hvrun's "[0]<stdout>:" prefix removed): size, count, type, op, and the wrong
// elements out of place and in place.
struct Row {
  std::uint64_t bytes = 0, count = 0, wrong_out = 0, wrong_in = 0;
  std::string type, op;
};

// A row is 12 fields as nccl-tests prints them: bytes, count, type, op, then time, algbw, busbw (numbers
// with a point) and wrong, out of place and again in place.
// (No std::regex: GCC 12 warns inside it under the sanitizers, and warnings are errors.)
std::vector<Row> table_rows(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  auto is_uint = [](const std::string& t) { return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos; };
  auto is_real = [](const std::string& t) { return !t.empty() && t.find_first_not_of("0123456789.") == std::string::npos; };
  while (std::getline(in, line)) {
    const std::string prefix = "[0]<stdout>:";
    if (line.starts_with(prefix)) line.erase(0, prefix.size());
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string t; fields >> t;) f.push_back(t);
    if (f.size() != 12 || !is_uint(f[0]) || !is_uint(f[1]) || !is_uint(f[7]) || !is_uint(f[11])) continue;
    bool reals = true;
    for (std::size_t i : {4, 5, 6, 8, 9, 10}) reals = reals && is_real(f[i]);
    if (!reals) continue;
    rows.push_back(Row{std::stoull(f[0]), std::stoull(f[1]), std::stoull(f[7]), std::stoull(f[11]), f[2], f[3]});
  }
  return rows;
}

void check_table(const std::string& out, const std::vector<std::uint64_t>& sizes, const std::string& type,
                 const std::string& op, std::size_t elem) {
  const auto rows = table_rows(out);
  REQUIRE(rows.size() == sizes.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].bytes == sizes[i]);
    CHECK(rows[i].count == sizes[i] / elem);
    CHECK(rows[i].type == type);
    CHECK(rows[i].op == op);
    CHECK(rows[i].wrong_out == 0);
    CHECK(rows[i].wrong_in == 0);
  }
  CHECK_THAT(out, Catch::Contains("# Out of bounds values : 0 OK"));
  const auto avg = out.find("# Avg bus bandwidth : ");
  REQUIRE(avg != std::string::npos);
  const std::string value = out.substr(avg + 22, out.find('\n', avg) - avg - 22);
  CHECK_NOTHROW(std::stod(value));
}

}  // namespace

TEST_CASE("allreduce bench: 2 ranks by hand print one checked table on rank 0", "[integration]") {
  ServedStore served;
  const std::vector<std::string> argv = {bench_bin(), "-b", "8", "-e", "1M", "-f", "8", "-n", "3", "-w", "1"};
  const auto results = run_by_hand(served, 2, {argv});
  for (const auto& r : results) {
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
  }
  check_table(results[0].out, {8, 64, 512, 4096, 32768, 262144}, "float", "sum", 4);
  CHECK_THAT(results[0].out, Catch::Contains("# hvrun-allreduce-bench: 2 ranks, backend gloo"));
  CHECK_THAT(results[0].out, Catch::Contains("iface=lo"));
  CHECK(results[1].out.empty());
}

TEST_CASE("allreduce bench: a wrong result makes the exit code non-zero", "[integration]") {
  // Ranks that disagree on the operation produce results that match neither answer.
  ServedStore served;
  const std::vector<std::string> sum = {bench_bin(), "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-o", "sum"};
  std::vector<std::string> max = sum;
  max.back() = "max";
  const auto results = run_by_hand(served, 2, {sum, max});
  INFO(results[0].out << results[0].err << results[1].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[1].exit_code == 1);
  CHECK_THAT(results[0].out, Catch::Contains("FAILED"));
  CHECK_THAT(results[0].err, Catch::Contains("wrong elements"));
  // Both columns are checked.
  const auto rows = table_rows(results[0].out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].wrong_out > 0);
  CHECK(rows[0].wrong_in > 0);
}

TEST_CASE("allreduce bench: usage errors and running outside hvrun exit 2 with one line", "[integration]") {
  auto r = run({bench_bin(), "-d", "half"}, 20s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("-d half: use float, double, int32 or int64"));
  r = run({bench_bin(), "-b", "1Q"}, 20s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown unit"));
  r = run({bench_bin(), "-b", "64", "-e", "8"}, 20s);
  CHECK(r.exit_code == 2);
  // Run by hand without the rank contract (test runners may have HVRUN_* set: clear them).
  r = run({"/usr/bin/env", "-u", "HVRUN_SIZE", "-u", "HVRUN_RANK", bench_bin()}, 20s);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("HVRUN_SIZE is not set: run this program under hvrun"));
}

TEST_CASE("allreduce bench under hvrun with 2 and 4 local ranks", "[integration]") {
  for (int ranks : {2, 4}) {
    ServedStore served;  // a store lives as long as its job: keys of the last job would mislead this one
    std::vector<std::string> argv = {hvrun_bin(), "-np", std::to_string(ranks)};
    for (const auto& e : served.env()) {
      argv.push_back("-x");
      argv.push_back(e);
    }
    argv.push_back(bench_bin());
    for (const char* a : {"-d", "int32", "-o", "max", "-b", "64", "-e", "64K", "-f", "32", "-n", "3", "-w", "1"})
      argv.push_back(a);
    auto r = run(argv, 60s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    check_table(r.out, {64, 2048, 65536}, "int32", "max", 4);
    CHECK_THAT(r.out, Catch::Contains("# hvrun-allreduce-bench: " + std::to_string(ranks) + " ranks"));
  }
}

TEST_CASE("the C example under hvrun with 3 ranks", "[integration]") {
  ServedStore served;
  std::vector<std::string> argv = {hvrun_bin(), "-np", "3"};
  for (const auto& e : served.env()) {
    argv.push_back("-x");
    argv.push_back(e);
  }
  argv.push_back(c_example_bin());
  auto r = run(argv, 60s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  for (int rank = 0; rank < 3; ++rank)
    CHECK_THAT(r.out, Catch::Contains("[" + std::to_string(rank) + "]<stdout>:rank " + std::to_string(rank) +
                                      " of 3 on lo: ok"));
}

// horovodrun's command line under hvrun: every option of horovod/runner/launch.py (v0.28.1), as its
// source defines them (tests/data/horovodrun_options.tsv, generated from it by
// scripts/horovodrun_options.py and compared with the real launch.py when the Horovod tarball is there),
// is accepted with horovodrun's meaning or refused with exit 2 and what to use instead.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/launch_options.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/cli_parse.hpp"
#include "tests/support/lab_hvrun.hpp"

using Args = std::vector<std::string>;
using hvrun::CliAction;
using hvrun::CliResult;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using hvrun::test::cli_error;
using hvrun::test::count_of;
using hvrun::test::parse_cli;

namespace {

std::optional<std::string> env_of(const CliResult& r, const std::string& name) {
  for (const auto& [k, v] : r.options.horovod_env)
    if (k == name) return v;
  return std::nullopt;
}

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("hvrun-hvdopts-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

struct CoutSilencer {
  std::ostringstream sink;
  std::streambuf* old = std::cout.rdbuf(sink.rdbuf());
  ~CoutSilencer() { std::cout.rdbuf(old); }
};

// What one option must do: the words before it, its values, and the check of the result. `refused`:
// a UsageError containing that text instead.
struct Expectation {
  Args before;
  Args values;
  std::function<void(const CliResult&)> check;
  std::string refused;
};

std::function<void(const CliResult&)> sets(std::string var, std::optional<std::string> value) {
  return [var, value](const CliResult& r) {
    CAPTURE(var);
    CHECK(env_of(r, var) == value);
  };
}

std::function<void(const CliResult&)> launches(std::function<bool(const hvrun::LaunchOptions&)> pred) {
  return [pred](const CliResult& r) {
    REQUIRE(r.action == CliAction::kLaunch);
    CHECK(pred(r.options));
  };
}

std::function<void(const CliResult&)> exits() {
  return [](const CliResult& r) {
    CHECK(r.action == CliAction::kExit);
    CHECK(r.exit_code == 0);
  };
}

std::map<std::string, Expectation> expectations(const TempDir& tmp) {
  const std::string key = tmp.write("id_test", "not a real key\n");
  const std::string hostfile = tmp.write("hosts", "x slots=2\ny slots=2\n");
  const std::string config = tmp.write("config.yaml", "params:\n  fusion_threshold_mb: 32\n");
  // Horovod elastic's options other than the two that ask for it need one of them.
  const Args elastic{"--host-discovery-script", "./discover.sh", "-np", "2"};
  using O = const hvrun::LaunchOptions&;
  return {
      {"-v", {{}, {}, exits(), ""}},
      {"--version", {{}, {}, exits(), ""}},
      {"-np", {{}, {"3"}, launches([](O o) { return o.np == 3; }), ""}},
      {"--num-proc", {{}, {"3"}, launches([](O o) { return o.np == 3; }), ""}},
      {"-cb", {{}, {}, exits(), ""}},
      {"--check-build", {{}, {}, exits(), ""}},
      {"--disable-cache", {{}, {}, launches([](O o) { return o.disable_cache; }), ""}},
      {"--start-timeout", {{}, {"45"}, launches([](O o) { return o.start_timeout == 45s; }), ""}},
      {"--network-interfaces",
       {{}, {"eth1,enp6s0"}, launches([](O o) { return o.network_interfaces == Args{"eth1,enp6s0"}; }), ""}},
      {"--network-interface", {{}, {"eth1"}, launches([](O o) { return o.network_interfaces == Args{"eth1"}; }), ""}},
      {"--output-filename", {{}, {"out"}, launches([](O o) { return o.output_filename == "out"; }), ""}},
      {"--verbose", {{}, {}, launches([](O o) { return o.verbose; }), ""}},
      {"--config-file", {{}, {config}, sets("HOROVOD_FUSION_THRESHOLD", "33554432"), ""}},
      {"-p", {{}, {"2222"}, launches([](O o) { return o.ssh_port == 2222; }), ""}},
      {"--ssh-port", {{}, {"2222"}, launches([](O o) { return o.ssh_port == 2222; }), ""}},
      {"-i", {{}, {key}, launches([key](O o) { return o.ssh_identity_file == key; }), ""}},
      {"--ssh-identity-file", {{}, {key}, launches([key](O o) { return o.ssh_identity_file == key; }), ""}},
      {"--fusion-threshold-mb", {{}, {"64"}, sets("HOROVOD_FUSION_THRESHOLD", "67108864"), ""}},
      {"--cycle-time-ms", {{}, {"2.5"}, sets("HOROVOD_CYCLE_TIME", "2.5"), ""}},
      {"--cache-capacity", {{}, {"512"}, sets("HOROVOD_CACHE_CAPACITY", "512"), ""}},
      {"--hierarchical-allreduce", {{}, {}, sets("HOROVOD_HIERARCHICAL_ALLREDUCE", "1"), ""}},
      {"--no-hierarchical-allreduce", {{}, {}, sets("HOROVOD_HIERARCHICAL_ALLREDUCE", "0"), ""}},
      {"--hierarchical-allgather", {{}, {}, sets("HOROVOD_HIERARCHICAL_ALLGATHER", "1"), ""}},
      {"--no-hierarchical-allgather", {{}, {}, sets("HOROVOD_HIERARCHICAL_ALLGATHER", "0"), ""}},
      {"--torus-allreduce", {{}, {}, sets("HOROVOD_TORUS_ALLREDUCE", "1"), ""}},
      {"--no-torus-allreduce", {{}, {}, sets("HOROVOD_TORUS_ALLREDUCE", "0"), ""}},
      {"--autotune", {{}, {}, sets("HOROVOD_AUTOTUNE", "1"), ""}},
      {"--no-autotune", {{}, {}, sets("HOROVOD_AUTOTUNE", std::nullopt), ""}},
      {"--autotune-log-file", {{"--autotune"}, {"tune.csv"}, sets("HOROVOD_AUTOTUNE_LOG", "tune.csv"), ""}},
      {"--autotune-warmup-samples", {{"--autotune"}, {"5"}, sets("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"), ""}},
      {"--autotune-steps-per-sample", {{"--autotune"}, {"7"}, sets("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "7"), ""}},
      {"--autotune-bayes-opt-max-samples",
       {{"--autotune"}, {"9"}, sets("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "9"), ""}},
      {"--autotune-gaussian-process-noise",
       {{"--autotune"}, {"0.3"}, sets("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.3"), ""}},
      {"--min-np", {{"-H", "a:2,b:2"}, {"2"}, launches([](O o) { return o.elastic && o.elastic->min_np == 2 && o.np == 2 && o.elastic->discovery_script.empty(); }), ""}},
      {"--min-num-proc", {{"-H", "a:2,b:2"}, {"2"}, launches([](O o) { return o.elastic && o.elastic->min_np == 2; }), ""}},
      {"--max-np", {elastic, {"8"}, launches([](O o) { return o.elastic && o.elastic->max_np == 8; }), ""}},
      {"--max-num-proc", {elastic, {"8"}, launches([](O o) { return o.elastic && o.elastic->max_np == 8; }), ""}},
      {"--slots-per-host", {elastic, {"2"}, launches([](O o) { return o.elastic && o.elastic->slots_per_host == 2; }), ""}},
      {"--elastic-timeout", {elastic, {"60"}, launches([](O o) { return o.elastic && o.elastic->timeout == 60s; }), ""}},
      {"--reset-limit", {elastic, {"3"}, launches([](O o) { return o.elastic && o.elastic->reset_limit == 3; }), ""}},
      {"--blacklist-cooldown-range",
       {elastic, {"60", "300"}, launches([](O o) { return o.elastic && o.elastic->cooldown == std::pair{60, 300}; }), ""}},
      {"--timeline-filename", {{}, {"tl.json"}, sets("HOROVOD_TIMELINE", "tl.json"), ""}},
      {"--timeline-mark-cycles", {{"--timeline-filename", "t"}, {}, sets("HOROVOD_TIMELINE_MARK_CYCLES", "1"), ""}},
      {"--no-timeline-mark-cycles", {{"--timeline-filename", "t"}, {}, sets("HOROVOD_TIMELINE_MARK_CYCLES", "0"), ""}},
      {"--no-stall-check", {{}, {}, sets("HOROVOD_STALL_CHECK_DISABLE", "1"), ""}},
      {"--stall-check", {{}, {}, sets("HOROVOD_STALL_CHECK_DISABLE", "0"), ""}},
      {"--stall-check-warning-time-seconds", {{}, {"30"}, sets("HOROVOD_STALL_CHECK_TIME_SECONDS", "30"), ""}},
      {"--stall-check-shutdown-time-seconds", {{}, {"90"}, sets("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"), ""}},
      {"--mpi-threads-disable", {{}, {}, sets("HOROVOD_MPI_THREADS_DISABLE", "1"), ""}},
      {"--no-mpi-threads-disable", {{}, {}, sets("HOROVOD_MPI_THREADS_DISABLE", "0"), ""}},
      {"--mpi-args",
       {{"--mpi"}, {"--map-by ppr:1:node"}, launches([](O o) { return o.mpi_args == "--map-by ppr:1:node"; }), ""}},
      {"--tcp", {{}, {}, sets("NCCL_IB_DISABLE", "1"), ""}},
      {"--binding-args",
       {{"--mpi"}, {"--bind-to core"}, launches([](O o) { return o.binding_args == "--bind-to core"; }), ""}},
      {"--num-nccl-streams", {{}, {"2"}, sets("HOROVOD_NUM_NCCL_STREAMS", "2"), ""}},
      {"--thread-affinity", {{}, {"1"}, sets("HOROVOD_THREAD_AFFINITY", "1"), ""}},
      {"--gloo-timeout-seconds", {{}, {"60"}, sets("HOROVOD_GLOO_TIMEOUT_SECONDS", "60"), ""}},
      {"--log-level",
       {{}, {"debug"},
        [](const CliResult& r) {
          CHECK(env_of(r, "HOROVOD_LOG_LEVEL") == "DEBUG");
          CHECK(r.options.log_level == spdlog::level::warn);  // hvrun's own level is another flag
        },
        ""}},
      {"--log-with-timestamp", {{}, {}, sets("HOROVOD_LOG_HIDE_TIME", "0"), ""}},
      {"--log-without-timestamp", {{}, {}, sets("HOROVOD_LOG_HIDE_TIME", "1"), ""}},
      {"-prefix-timestamp", {{}, {}, launches([](O o) { return o.prefix_timestamp; }), ""}},
      {"--prefix-output-with-timestamp", {{}, {}, launches([](O o) { return o.prefix_timestamp; }), ""}},
      {"--log-hide-timestamp", {{}, {}, sets("HOROVOD_LOG_HIDE_TIME", "1"), ""}},
      {"--no-log-hide-timestamp", {{}, {}, sets("HOROVOD_LOG_HIDE_TIME", "0"), ""}},
      {"-H",
       {{},
        {"a:2,b:2"},
        launches([](O o) { return o.hosts == std::vector<hvrun::HostSpec>{{"a", 2}, {"b", 2}}; }),
        ""}},
      {"--hosts", {{}, {"a:2"}, launches([](O o) { return o.hosts == std::vector<hvrun::HostSpec>{{"a", 2}}; }), ""}},
      {"-hostfile",
       {{}, {hostfile}, launches([](O o) { return o.hosts == std::vector<hvrun::HostSpec>{{"x", 2}, {"y", 2}}; }), ""}},
      {"--hostfile",
       {{}, {hostfile}, launches([](O o) { return o.hosts == std::vector<hvrun::HostSpec>{{"x", 2}, {"y", 2}}; }), ""}},
      {"--host-discovery-script",
       {{"-np", "2"}, {"./discover.sh"}, launches([](O o) { return o.elastic && o.elastic->discovery_script == "./discover.sh" && o.elastic->min_np == 2 && !o.elastic->max_np; }), ""}},
      {"--gloo", {{}, {}, launches([](O o) { return !o.mpi; }), ""}},
      {"--mpi", {{}, {}, launches([](O o) { return o.mpi; }), ""}},
      {"--jsrun", {{}, {}, {}, "jsrun"}},
  };
}

struct OptionRow {
  Args names;
  std::string dest;
  int values = 0;
};

std::vector<OptionRow> read_table(std::istream& in) {
  std::vector<OptionRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string names, dest, values;
    std::getline(fields, names, '\t');
    std::getline(fields, dest, '\t');
    std::getline(fields, values, '\t');
    OptionRow row{{}, dest, std::stoi(values)};
    std::istringstream list(names);
    for (std::string n; std::getline(list, n, ',');) row.names.push_back(n);
    rows.push_back(std::move(row));
  }
  return rows;
}

const fs::path kTable = fs::path(hvrun::test::source_dir()) / "tests/data/horovodrun_options.tsv";

}  // namespace

TEST_CASE("every horovodrun option is accepted with its meaning, or refused with exit 2", "[cli][horovodrun]") {
  std::ifstream in(kTable);
  REQUIRE(in);
  const auto rows = read_table(in);
  REQUIRE(rows.size() == 61);  // horovodrun 0.28.1's parser
  TempDir tmp;
  const auto expected = expectations(tmp);
  std::size_t checked = 0;
  for (const OptionRow& row : rows) {
    for (const std::string& name : row.names) {
      CAPTURE(name, row.dest);
      const auto it = expected.find(name);
      if (it == expected.end()) {
        FAIL_CHECK("horovodrun's " << name << " has no expectation here: add one");
        continue;
      }
      const Expectation& e = it->second;
      REQUIRE(static_cast<int>(e.values.size()) == row.values);  // as many values as horovodrun takes
      Args args = e.before;
      args.push_back(name);
      args.insert(args.end(), e.values.begin(), e.values.end());
      args.push_back("cmd");
      CAPTURE(args);
      if (!e.refused.empty()) {
        try {
          parse_cli(args);
          FAIL_CHECK("accepted");
        } catch (const hvrun::UsageError& err) {
          CHECK_THAT(err.what(), Catch::Contains(e.refused) && Catch::Contains(name) && Catch::Contains("use"));
        }
      } else {
        CoutSilencer quiet;  // --version, --check-build
        e.check(parse_cli(args));
      }
      ++checked;
    }
  }
  CHECK(checked == expected.size());  // no expectation for an option horovodrun does not have
}

TEST_CASE("the option table is horovodrun 0.28.1's own launch.py", "[cli][horovodrun][integration]") {
  // shared/ sits beside the checkout (CI), or beside the folder of worktrees.
  const std::string name = "shared/horovod/horovod-0.28.1-torch1.13-gloo.tar.xz";
  fs::path tarball = fs::path(hvrun::test::source_dir()) / ".." / name;
  if (!fs::exists(tarball)) tarball = fs::path(hvrun::test::source_dir()) / "../.." / name;
  if (!fs::exists(tarball)) {
    WARN("skipped: ../" << name << " is not there, so the table cannot be compared with horovodrun's source");
    return;
  }
  TempDir tmp;
  const std::string member = "site/horovod/runner/launch.py";
  auto untar = hvrun::test::run({"/usr/bin/tar", "-xJf", tarball.string(), "-C", tmp.dir.string(), member}, 60s);
  INFO(untar.err);
  REQUIRE(untar.exit_code == 0);
  auto gen = hvrun::test::run({"/usr/bin/python3", hvrun::test::source_dir() + "/scripts/horovodrun_options.py",
                               (tmp.dir / member).string()},
                              60s);
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  std::ifstream in(kTable);
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(gen.out == committed);
}

TEST_CASE("--config-file: horovodrun's sections, types and precedence", "[cli][horovodrun]") {
  TempDir tmp;
  const std::string file = tmp.write("c.yaml",
                                     "controller: MPI\n"
                                     "params:\n  fusion_threshold_mb: 16\n  cycle_time_ms: 5\n"
                                     "  hierarchical_allreduce: true\n"
                                     "autotune:\n  warmup_samples: 4\n"
                                     "timeline:\n  filename: /tmp/tl.json\n  mark_cycles: yes\n"
                                     "stall_check:\n  enabled: false\n  warning_time_seconds: 20\n"
                                     "library_options:\n  gloo_timeout_seconds: 90\n"
                                     "logging:\n  level: info\n  with_timestamp: false\n");
  SECTION("the file alone") {
    const auto r = parse_cli({"--config-file", file, "cmd"});
    CHECK(r.options.mpi);  // its controller, without --gloo or --mpi
    CHECK(env_of(r, "HOROVOD_FUSION_THRESHOLD") == "16777216");
    CHECK(env_of(r, "HOROVOD_CYCLE_TIME") == "5");  // a whole number stays one, as in Python's str()
    CHECK(env_of(r, "HOROVOD_HIERARCHICAL_ALLREDUCE") == "1");
    CHECK(env_of(r, "HOROVOD_AUTOTUNE") == std::nullopt);  // an autotune section without enabled: off
    CHECK(env_of(r, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES") == std::nullopt);
    CHECK(env_of(r, "HOROVOD_TIMELINE") == "/tmp/tl.json");
    CHECK(env_of(r, "HOROVOD_TIMELINE_MARK_CYCLES") == "1");
    CHECK(env_of(r, "HOROVOD_STALL_CHECK_DISABLE") == "1");
    CHECK(env_of(r, "HOROVOD_STALL_CHECK_TIME_SECONDS") == "20");
    CHECK(env_of(r, "HOROVOD_GLOO_TIMEOUT_SECONDS") == "90");
    CHECK(env_of(r, "HOROVOD_LOG_LEVEL") == "INFO");
    CHECK(env_of(r, "HOROVOD_LOG_HIDE_TIME") == "1");
  }
  SECTION("a flag wins over the file whether it comes before or after it") {
    for (const Args& args : {Args{"--fusion-threshold-mb", "1", "--config-file", file, "--gloo", "cmd"},
                             Args{"--gloo", "--config-file", file, "--fusion-threshold-mb", "1", "cmd"}}) {
      CAPTURE(args);
      const auto r = parse_cli(args);
      CHECK_FALSE(r.options.mpi);  // --gloo beats the file's controller
      CHECK(env_of(r, "HOROVOD_FUSION_THRESHOLD") == "1048576");
      CHECK(env_of(r, "HOROVOD_CYCLE_TIME") == "5");  // the rest still from the file
    }
    const auto r = parse_cli({"--config-file", file, "--stall-check", "--log-level", "error", "--autotune", "cmd"});
    CHECK(env_of(r, "HOROVOD_STALL_CHECK_DISABLE") == "0");
    CHECK(env_of(r, "HOROVOD_LOG_LEVEL") == "ERROR");
    CHECK(env_of(r, "HOROVOD_AUTOTUNE") == "1");
    CHECK(env_of(r, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES") == "4");
  }
  SECTION("errors name the file and the key") {
    CHECK_THAT(cli_error({"--config-file", tmp.write("b.yaml", "params:\n  cache_capacity: many\n"), "cmd"}),
               Catch::Contains("params.cache_capacity is not an integer"));
    CHECK_THAT(cli_error({"--config-file", tmp.write("n.yaml", "params:\n  cycle_time_ms: -1\n"), "cmd"}),
               Catch::Contains("--cycle-time-ms: -1 must be >= 0 (from --config-file)"));
    CHECK_THAT(cli_error({"--config-file", tmp.write("k.yaml", "controller: nccl\n"), "cmd"}),
               Catch::Contains("controller 'nccl' is not gloo or mpi"));
    CHECK_THAT(cli_error({"--config-file", (tmp.dir / "missing.yaml").string(), "cmd"}), Catch::Contains("cannot be read"));
    CHECK_THAT(cli_error({"--config-file", tmp.write("y.yaml", "params: [1\n"), "cmd"}), Catch::Contains("not valid YAML"));
  }
}

TEST_CASE("horovodrun's checks and exclusions", "[cli][horovodrun]") {
  CHECK(cli_error({"--fusion-threshold-mb", "-1", "cmd"}) == "--fusion-threshold-mb: -1 must be >= 0");
  CHECK(cli_error({"--autotune-gaussian-process-noise", "1.5", "cmd"}) ==
        "--autotune-gaussian-process-noise: 1.5 must be in [0, 1]");
  CHECK(cli_error({"--cache-capacity", "1.5", "cmd"}) == "--cache-capacity: '1.5' is not an integer");
  CHECK(cli_error({"--hierarchical-allreduce", "--no-hierarchical-allreduce", "cmd"}) ==
        "--hierarchical-allreduce excludes --no-hierarchical-allreduce; give one of them");
  CHECK_THAT(cli_error({"--gloo", "--mpi", "cmd"}), Catch::Contains("excludes") && Catch::Contains("--mpi"));
  CHECK_THAT(cli_error({"--mpi", "--mpi-args=\"unclosed", "cmd"}), Catch::Contains("--mpi-args"));
  // Autotune and timeline details only take effect with autotuning / a timeline file, as in horovodrun.
  const auto r = parse_cli({"--autotune-warmup-samples", "3", "--timeline-mark-cycles", "cmd"});
  CHECK(r.options.horovod_env.empty());
  // --log-level takes horovodrun's values in any case.
  CHECK(env_of(parse_cli({"--log-level", "WaRnInG", "cmd"}), "HOROVOD_LOG_LEVEL") == "WARNING");
}

TEST_CASE("mpirun's and horovodrun's single-dash words never fall into -h", "[cli]") {
  TempDir tmp;
  const std::string hostfile = tmp.write("hosts", "x slots=2\n");
  using Hosts = std::vector<hvrun::HostSpec>;
  CHECK(parse_cli({"-hostfile", hostfile, "cmd"}).options.hosts == Hosts{{"x", 2}});
  CHECK(parse_cli({"-hostfile=" + hostfile, "cmd"}).options.hosts == Hosts{{"x", 2}});
  CHECK(parse_cli({"-host", "a,b", "cmd"}).options.hosts == Hosts{{"a", 1}, {"b", 1}});
  CHECK(parse_cli({"--host", "a:2", "cmd"}).options.hosts == Hosts{{"a", 2}});
  CHECK(parse_cli({"-n", "4", "cmd"}).options.np == 4);
  CHECK(parse_cli({"-np", "4", "cmd"}).options.np == 4);
  CHECK(parse_cli({"-Ha:3", "cmd"}).options.hosts == Hosts{{"a", 3}});  // a short option's value attached
  CHECK(parse_cli({"-p2222", "cmd"}).options.ssh_port == 2222);
  const auto o = parse_cli({"-oversubscribe", "-allow-run-as-root", "-tag-output", "--tag-output", "cmd"}).options;
  CHECK(o.oversubscribe);
  CHECK(o.allow_run_as_root);
  CHECK(parse_cli({"--oversubscribe", "--allow-run-as-root", "cmd"}).options.oversubscribe);
  // A single-dash word after the command is the command's.
  CHECK(parse_cli({"-np", "2", "prog", "-hostfile", "x"}).options.command == Args{"prog", "-hostfile", "x"});
  for (const auto& [args, message] : std::vector<std::pair<Args, std::string>>{
           {{"-hostfiel", "f", "cmd"}, "unknown option '-hostfiel' (did you mean -hostfile?)"},
           {{"-hots", "a", "cmd"}, "unknown option '-hots' (did you mean -hosts?)"},
           {{"-hx", "cmd"}, "unknown option '-hx' (did you mean -h?)"},
           {{"-oversubscrbe", "cmd"}, "unknown option '-oversubscrbe' (did you mean -oversubscribe?)"},
       }) {
    CAPTURE(args);
    try {
      parse_cli(args);
      FAIL_CHECK("accepted");
    } catch (const hvrun::UsageError& e) {
      CHECK(std::string(e.what()) == message);
    }
  }
}

TEST_CASE("horovodrun's tuning variables reach the ranks, and -x wins", "[cli][horovodrun][integration]") {
  auto r = hvrun::test::run({hvrun::test::hvrun_bin(), "-np", "2", "--fusion-threshold-mb", "2", "--log-level", "debug",
                             "-x", "HOROVOD_LOG_LEVEL=ERROR", "sh", "-c",
                             "echo fusion=$HOROVOD_FUSION_THRESHOLD level=$HOROVOD_LOG_LEVEL"},
                            60s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.out, "fusion=2097152 level=ERROR") == 2);
}

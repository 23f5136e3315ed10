// torchrun's command line under hvrun: every option of torch/distributed/run.py (tests/data/
// torchrun_options.tsv, names only) is an option of hvrun's parser in both spellings and is accepted with
// torchrun's meaning across the hosts, accepted where it can only agree with hvrun's plan, or refused with
// exit 2 and one line naming the flag and what to do.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "launcher/cli/cli_bindings.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/torchrun_flags.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/cli_parse.hpp"

using Args = std::vector<std::string>;
using hvrun::LaunchOptions;
using hvrun::test::cli_error;

namespace {

LaunchOptions parse(const Args& args) { return hvrun::test::parse_cli(args).options; }

// The reference list: each line's names and value count.
std::vector<std::pair<std::string, int>> reference_options() {
  std::ifstream in(hvrun::test::source_dir() + "/tests/data/torchrun_options.tsv");
  REQUIRE(in);
  std::vector<std::pair<std::string, int>> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    const auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    out.emplace_back(line.substr(0, tab), std::stoi(line.substr(tab + 1)));
  }
  return out;
}

std::vector<std::string> split(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream in(names);
  for (std::string n; std::getline(in, n, ',');) out.push_back(n);
  return out;
}

const Args kTwoHosts{"-H", "node1,node2"};

Args with(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("torchrun's reference options: every one is hvrun's, in both spellings, mapped or refused", "[cli][torchrun]") {
  const auto reference = reference_options();
  REQUIRE(reference.size() > 25);
  std::set<std::string> table;
  for (const auto& t : hvrun::torchrun_options()) table.insert(t.names);
  std::set<std::string> listed;
  for (const auto& [names, values] : reference) listed.insert(names);
  CHECK(table == listed);  // nothing of the reference left out, nothing invented

  LaunchOptions o;
  hvrun::CliBindings b(o);
  CLI::App app;
  hvrun::define_options(app, b);
  for (const auto& [names, values] : reference) {
    for (const auto& name : split(names)) {
      INFO(name);
      const CLI::Option* opt = app.get_option_no_throw(name);
      REQUIRE(opt != nullptr);
      CHECK((opt->get_expected_min() > 0) == (values > 0));
    }
  }
  for (const auto& t : hvrun::torchrun_options()) {
    if (*t.refusal == '\0') continue;
    for (const auto& name : split(t.names)) {
      INFO(name);
      const std::string message = cli_error({name, "x", "train.py"});
      CHECK_THAT(message, Catch::StartsWith(split(t.names).front() + ": "));
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("torchrun's line across the hosts: sizes, both spellings, the run id and role", "[cli][torchrun]") {
  SECTION("--nproc-per-node N: N ranks on every host, -np the product") {
    for (const char* spelling : {"--nproc-per-node", "--nproc_per_node"}) {
      const auto o = parse(with(kTwoHosts, {spelling, "2", "--nnodes", "2", "train.py", "--lr", "3"}));
      CHECK(o.np == 4);
      REQUIRE(o.hosts.size() == 2);
      CHECK(o.hosts[0].slots == 2);
      CHECK(o.hosts[1].slots == 2);
      CHECK(o.command == Args{"python3", "-u", "train.py", "--lr", "3"});
      CHECK(o.torchrun_form);
    }
  }
  SECTION("one host by default, as torchrun on one node") {
    const auto o = parse({"--nproc_per_node", "3", "--standalone", "train.py"});
    CHECK(o.np == 3);
    REQUIRE(o.hosts.size() == 1);
    CHECK(o.hosts[0].name == "localhost");
    CHECK(o.hosts[0].slots == 3);
  }
  SECTION("agreeing -H slots and -np are accepted, contradicting ones refused") {
    CHECK(parse({"-H", "a:2,b:2", "--nproc-per-node", "2", "-np", "4", "t.py"}).np == 4);
    CHECK_THAT(cli_error({"-H", "a:4,b:2", "--nproc-per-node", "2", "t.py"}),
               Catch::StartsWith("--nproc-per-node 2 runs that many ranks on every host, and a has 4 slots"));
    CHECK_THAT(cli_error({"-H", "a,b", "--nproc-per-node", "2", "-np", "3", "t.py"}),
               Catch::StartsWith("-np 3 contradicts --nproc-per-node 2 on 2 hosts (4 ranks)"));
    CHECK(cli_error({"--nproc-per-node", "gpu", "t.py"}) == "accepted");  // counted on the host (test_device_count.cpp)
    CHECK_THAT(cli_error({"--nproc-per-node", "two", "t.py"}), Catch::Contains("is not a number of ranks per host"));
  }
  SECTION("--nnodes against the hosts; MIN:MAX sets the restarts' floor") {
    CHECK_THAT(cli_error({"--nnodes", "2", "--nproc-per-node", "2", "t.py"}),
               Catch::StartsWith("--nnodes 2 needs 2 hosts, and hvrun starts every node from this one command: give "
                                 "them with -H or --hostfile"));
    CHECK_THAT(cli_error(with(kTwoHosts, {"--nnodes", "3", "t.py"})),
               Catch::StartsWith("--nnodes 3 contradicts the 2 hosts given (node1, node2); give --nnodes 2"));
    CHECK_THAT(cli_error(with(kTwoHosts, {"--nnodes", "3:1", "t.py"})), Catch::Contains("is not a number of nodes"));
    const auto o = parse(with(kTwoHosts, {"--nnodes", "1:2", "--nproc-per-node", "2", "--max-restarts", "1", "t.py"}));
    CHECK(o.min_np == 2);
    CHECK(o.max_restarts == 1);
    CHECK_FALSE(o.elastic);
    CHECK(parse(with(kTwoHosts, {"--nnodes", "1:2", "t.py"})).min_np == 0);  // without restarts: no floor to keep
  }
  SECTION("--rdzv-id is the run id, --role the role; --max_restarts is --max-restarts") {
    const auto o = parse(with(kTwoHosts, {"--rdzv_id", "job7", "--role", "trainer", "--max_restarts", "2", "t.py"}));
    CHECK(o.run_id == "job7");
    CHECK(o.role == "trainer");
    CHECK(o.max_restarts == 2);
    CHECK(parse({"--standalone", "--rdzv-id", "x", "t.py"}).run_id.empty());  // torchrun ignores it there
    CHECK(parse({"--rdzv-id", "none", "--nproc-per-node", "1", "t.py"}).run_id.empty());  // torchrun's default
  }
}

TEST_CASE("torchrun's options that can only agree with hvrun's plan: accepted or refused naming the flag",
          "[cli][torchrun]") {
  SECTION("--standalone: one node") {
    CHECK(cli_error({"--standalone", "t.py"}) == "accepted");
    CHECK_THAT(cli_error(with(kTwoHosts, {"--standalone", "t.py"})),
               Catch::StartsWith("--standalone runs one node (torchrun's), and the hosts are 2 (node1, node2)"));
  }
  SECTION("--rdzv-endpoint: one of the hosts, the port anything") {
    CHECK(cli_error(with(kTwoHosts, {"--rdzv-backend", "c10d", "--rdzv-endpoint", "node1:29400", "t.py"})) == "accepted");
    CHECK(cli_error(with(kTwoHosts, {"--rdzv_endpoint", "NODE2", "t.py"})) == "accepted");
    CHECK(cli_error({"--rdzv-endpoint", "127.0.0.1:29400", "t.py"}) == "accepted");  // localhost, named two ways
    CHECK_THAT(cli_error(with(kTwoHosts, {"--rdzv-endpoint", "node9:29400", "t.py"})),
               Catch::StartsWith("--rdzv-endpoint node9:29400: node9 is not one of the hosts (node1, node2)"));
    CHECK_THAT(cli_error(with(kTwoHosts, {"--rdzv-endpoint", "node1:99999", "t.py"})), Catch::Contains("is not HOST[:PORT]"));
    CHECK_THAT(cli_error({"--rdzv-backend", "zookeeper", "t.py"}),
               Catch::StartsWith("--rdzv-backend: 'zookeeper' is not one of torchrun's backends"));
  }
  SECTION("--master-addr names rank 0's host; --master-port is MASTER_PORT; both only with static rendezvous") {
    const auto o = parse(with(kTwoHosts, {"--master-addr", "node1", "--master_port", "29500", "t.py"}));
    CHECK(o.env == std::vector<std::pair<std::string, std::optional<std::string>>>{{"MASTER_PORT", "29500"}});
    CHECK_THAT(cli_error(with(kTwoHosts, {"--master-addr", "node2", "t.py"})),
               Catch::StartsWith("--master-addr node2: hvrun runs rank 0 on the first host, node1"));
    CHECK(cli_error(with(kTwoHosts, {"--rdzv-backend", "c10d", "--master-addr", "node2", "t.py"})) == "accepted");
    CHECK(parse(with(kTwoHosts, {"--rdzv-backend", "c10d", "--master-port", "1", "t.py"})).env.empty());
    CHECK_THAT(cli_error(with(kTwoHosts, {"--master-port", "29500", "-x", "MASTER_PORT=1", "t.py"})),
               Catch::StartsWith("--master-port and -x MASTER_PORT both set"));
  }
  SECTION("--node-rank and --local-addr: one host only") {
    CHECK(cli_error({"--node-rank", "0", "t.py"}) == "accepted");
    CHECK_THAT(cli_error(with(kTwoHosts, {"--node_rank", "1", "t.py"})),
               Catch::StartsWith("--node-rank 1: hvrun starts all 2 hosts from this one command"));
    CHECK(cli_error({"--local-addr", "10.0.0.1", "t.py"}) == "accepted");
    CHECK_THAT(cli_error(with(kTwoHosts, {"--local-addr", "10.0.0.1", "t.py"})),
               Catch::StartsWith("--local-addr: hvrun finds each host's address by probing its NICs"));
  }
  SECTION("--monitor-interval, --start-method, --rdzv-conf") {
    CHECK(cli_error({"--monitor-interval", "5", "--start-method", "fork", "t.py"}) == "accepted");
    CHECK(cli_error({"--start_method", "thread", "t.py"}) != "accepted");
    CHECK(parse({"--rdzv-conf", "join_timeout=90,read_timeout=60", "t.py"}).start_timeout == std::chrono::seconds(90));
    CHECK(parse({"--rdzv-conf", "join_timeout=90", "--start-timeout", "5", "t.py"}).start_timeout ==
          std::chrono::seconds(5));
    CHECK_THAT(cli_error({"--rdzv-conf", "join_timeout", "t.py"}), Catch::StartsWith("--rdzv-conf: 'join_timeout' is not KEY=VALUE"));
  }
}

TEST_CASE("torchrun's interpreter rule: a script runs with Python, -m a module, --no-python as it is",
          "[cli][torchrun]") {
  ::unsetenv("PYTHON_EXEC");
  const Args t{"--nproc-per-node", "2"};
  CHECK(parse(with(t, {"train.py", "-x"})).command == Args{"python3", "-u", "train.py", "-x"});
  CHECK(parse(with(t, {"-m", "pkg.train", "--lr", "3"})).command == Args{"python3", "-u", "-m", "pkg.train", "--lr", "3"});
  CHECK(parse(with(t, {"--no-python", "./train.sh", "a"})).command == Args{"./train.sh", "a"});
  const auto run_path = parse(with(t, {"--run-path", "/abs/train.py", "a"})).command;
  REQUIRE(run_path.size() == 6);
  CHECK(Args(run_path.begin(), run_path.begin() + 3) == Args{"python3", "-u", "-c"});
  CHECK_THAT(run_path[3], Catch::Contains("runpy.run_path"));
  CHECK(Args(run_path.begin() + 4, run_path.end()) == Args{"/abs/train.py", "a"});
  CHECK(parse(with(t, {"-x", "PYTHON_EXEC=/opt/py/bin/python", "train.py"})).command.front() == "/opt/py/bin/python");
  ::setenv("PYTHON_EXEC", "/usr/bin/python3.11", 1);
  CHECK(parse(with(t, {"train.py"})).command.front() == "/usr/bin/python3.11");
  ::unsetenv("PYTHON_EXEC");
  CHECK_THAT(cli_error(with(t, {"-m", "--no-python", "x"})), Catch::StartsWith("-m/--module runs a Python module"));
  CHECK_THAT(cli_error(with(t, {"python3", "train.py"})),
             Catch::StartsWith("under torchrun's options the command is a script that hvrun runs with Python") &&
                 Catch::Contains("drop 'python3'"));
  CHECK(parse(with(t, {"--no-python", "python3", "train.py"})).command == Args{"python3", "train.py"});
  INFO("hvrun's own form is unchanged");
  CHECK(parse({"-np", "2", "python", "train.py"}).command == Args{"python", "train.py"});
  CHECK(parse({"-np", "2", "--max-restarts", "1", "train.py"}).command == Args{"train.py"});
}

TEST_CASE("torchrun's log options and hvrun's console filters, in either form", "[cli][torchrun]") {
  const auto o = parse({"--log_dir", "logs", "-t", "3", "--redirects", "0:1", "--local-ranks-filter", "0",
                        "--ranks-filter", "0,5", "--prefix-output-with-hostname", "-np", "2", "python3", "t.py"});
  CHECK(o.command == Args{"python3", "t.py"});  // hvrun's own form: the log options do not ask for torchrun's
  CHECK_FALSE(o.torchrun_form);
  CHECK(o.logs.dir == "logs");
  CHECK((o.logs.tee.out(0) && o.logs.tee.err(4)));
  CHECK((o.logs.redirects.out(0) && !o.logs.redirects.out(1)));
  CHECK(o.logs.local_ranks == std::set<int>{0});
  CHECK(o.logs.ranks == std::set<int>{0, 5});
  CHECK(o.logs.prefix_host);
  CHECK_THAT(cli_error({"-t", "5", "t.py"}), Catch::StartsWith("--tee: '5' is not 0-3"));
  CHECK_THAT(cli_error({"--local-ranks-filter", "a", "t.py"}), Catch::StartsWith("--local-ranks-filter: 'a' is not"));
  CHECK_THAT(cli_error({"--log-dir", "d", "--output-filename", "o", "t.py"}),
             Catch::StartsWith("--log-dir and --output-filename both write the ranks' output to files"));
  CHECK_THAT(cli_error({"-r", "3", "--mpi", "t.py"}), Catch::StartsWith("--redirects: with --mpi"));
  CHECK_THAT(cli_error({"--log-dir", "d", "--host-discovery-script", "./d.sh", "-np", "2", "t.py"}),
             Catch::Contains("do not apply to a Horovod elastic job"));
}

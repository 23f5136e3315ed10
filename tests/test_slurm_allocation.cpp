// Slurm's compressed host lists and task counts (launcher/cli/slurm_host_list.hpp), the allocation read
// from the environment (launcher/cli/slurm_allocation.hpp) and the --launcher choice (launcher_choice.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "launcher/cli/launcher_choice.hpp"
#include "launcher/cli/slurm_allocation.hpp"
#include "launcher/cli/slurm_host_list.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/usage_error.hpp"

using hvrun::AgentLauncher;
using hvrun::HostSpec;
using hvrun::UsageError;
using hvrun::test::usage_error;
using Names = std::vector<std::string>;
using Hosts = std::vector<HostSpec>;
using namespace std::chrono_literals;

namespace {

Names expand(std::string_view list) { return hvrun::expand_slurm_host_list(list, "SLURM_JOB_NODELIST"); }

hvrun::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("Slurm host lists expand as scontrol show hostnames does", "[slurm]") {
  CHECK(expand("node[1-3,7]") == Names{"node1", "node2", "node3", "node7"});
  CHECK(expand("gpu[01-04],cpu5") == Names{"gpu01", "gpu02", "gpu03", "gpu04", "cpu5"});
  CHECK(expand("n[9-11]") == Names{"n9", "n10", "n11"});
  CHECK(expand("n[009-011]") == Names{"n009", "n010", "n011"});
  CHECK(expand("n[08-10]") == Names{"n08", "n09", "n10"});
  CHECK(expand("n[1-02]") == Names{"n1", "n2"});  // the lower bound sets the width
  CHECK(expand("n[98-101]") == Names{"n98", "n99", "n100", "n101"});
  CHECK(expand("rack[1-2]-n[08-09]") == Names{"rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"});
  CHECK(expand("a[1-2]b[3-4]") == Names{"a1b3", "a1b4", "a2b3", "a2b4"});
  CHECK(expand("n[1-2][5]") == Names{"n15", "n25"});
  CHECK(expand("[1-2]") == Names{"1", "2"});
  CHECK(expand("single") == Names{"single"});
  CHECK(expand("a, b ,,c") == Names{"a", "b", "c"});
  CHECK(expand("slm-h[0-2]") == Names{"slm-h0", "slm-h1", "slm-h2"});
  CHECK(expand("n[0-99999]").size() == 100'000);
}

TEST_CASE("malformed Slurm host lists are refused with the variable and the reason", "[slurm]") {
  CHECK(usage_error([] { expand("n[3-1]"); }) == "SLURM_JOB_NODELIST: 'n[3-1]': range 3-1 runs backwards");
  CHECK_THAT(usage_error([] { expand("n[1-2"); }), Catch::EndsWith("'[' without its ']'"));
  CHECK_THAT(usage_error([] { expand("n1-2]"); }), Catch::EndsWith("']' without '['"));
  CHECK_THAT(usage_error([] { expand("n[1-[2]]"); }), Catch::EndsWith("brackets inside brackets"));
  CHECK_THAT(usage_error([] { expand("x[1-3]y"); }), Catch::EndsWith("text after the last ']' in 'x[1-3]y'"));
  CHECK_THAT(usage_error([] { expand("n[]"); }), Catch::EndsWith("empty range in brackets"));
  CHECK_THAT(usage_error([] { expand("n[1,,2]"); }), Catch::EndsWith("empty range in brackets"));
  CHECK_THAT(usage_error([] { expand("n[a-b]"); }), Catch::EndsWith("range bound 'a' is not a number"));
  CHECK_THAT(usage_error([] { expand("n[1-]"); }), Catch::EndsWith("range bound '' is not a number"));
  CHECK_THAT(usage_error([] { expand("n[-1]"); }), Catch::EndsWith("range bound '' is not a number"));
  CHECK_THAT(usage_error([] { expand("n[1 -2]"); }), Catch::EndsWith("a blank inside brackets"));
  CHECK_THAT(usage_error([] { expand("n[0-100000]"); }), Catch::EndsWith("more than 100000 names"));
  CHECK_THAT(usage_error([] { expand("a[0-999]b[0-999]"); }), Catch::EndsWith("more than 100000 names"));
  CHECK_THAT(usage_error([] { expand("n[1-9999999999999999999]"); }), Catch::EndsWith("is too long"));
  CHECK_THAT(usage_error([] { expand("a,b,a"); }), Catch::EndsWith("node 'a' is listed twice"));
  CHECK_THAT(usage_error([] { expand("n[1-2],n2"); }), Catch::EndsWith("node 'n2' is listed twice"));
  CHECK_THAT(usage_error([] { expand(" , "); }), Catch::EndsWith("no host names"));
}

TEST_CASE("the expansion agrees with Slurm's own scontrol", "[slurm]") {
  if (!std::filesystem::exists("/usr/bin/scontrol")) {
    WARN("skipped: /usr/bin/scontrol (slurm-client) is not installed, nothing to compare with");
    return;
  }
  // scontrol needs a configuration to start, not a controller: a minimal one of our own.
  const auto dir = std::filesystem::temp_directory_path() / ("hvrun-scontrol-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "slurm.conf") << "ClusterName=hvrun\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n"
                                       "PartitionName=p Nodes=n1\n";
  for (const char* list : {"node[1-3,7]", "gpu[01-04],cpu5", "n[009-011]", "n[98-101]", "rack[1-2]-n[08-10]",
                           "a[1-2]b[3-4]", "n[1-02]", "x[0-3,10-12]y[1-2],z", "[1-2]"}) {
    INFO(list);
    auto r = hvrun::test::run({"/usr/bin/env", "SLURM_CONF=" + (dir / "slurm.conf").string(), "/usr/bin/scontrol",
                               "show", "hostnames", list},
                              30s);
    REQUIRE(r.exit_code == 0);
    std::istringstream words(r.out);
    Names theirs;
    for (std::string w; words >> w;) theirs.push_back(w);
    CHECK(expand(list) == theirs);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("SLURM_TASKS_PER_NODE expands N(xM)", "[slurm]") {
  using Counts = std::vector<int>;
  auto counts = [](std::string_view s) { return hvrun::expand_slurm_counts(s, "SLURM_TASKS_PER_NODE"); };
  CHECK(counts("2(x3),1") == Counts{2, 2, 2, 1});
  CHECK(counts("4") == Counts{4});
  CHECK(counts("1,2(x2),8") == Counts{1, 2, 2, 8});
  CHECK(usage_error([&] { counts("2(x0)"); }) == "SLURM_TASKS_PER_NODE: '2(x0)': '2(x0)': counts must be positive");
  CHECK_THAT(usage_error([&] { counts("0"); }), Catch::EndsWith("counts must be positive"));
  CHECK_THAT(usage_error([&] { counts("2(3)"); }), Catch::EndsWith("'2(3)' is not N or N(xM)"));
  CHECK_THAT(usage_error([&] { counts("2(x3"); }), Catch::EndsWith("'2(x3' is not N or N(xM)"));
  CHECK_THAT(usage_error([&] { counts("2,,1"); }), Catch::EndsWith("count '' is not a number"));
  CHECK_THAT(usage_error([&] { counts("x"); }), Catch::EndsWith("count 'x' is not a number"));
  CHECK_THAT(usage_error([&] { counts("1(x100001)"); }), Catch::EndsWith("more than 100000 counts"));
  CHECK_THAT(usage_error([&] { counts("3000000000"); }), Catch::EndsWith("count 3000000000 is too large"));
}

TEST_CASE("the allocation comes from SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE", "[slurm]") {
  CHECK_FALSE(hvrun::slurm_allocation(env_of({})).has_value());
  auto a = hvrun::slurm_allocation(
      env_of({{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", "n[1-3],gpu7"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}}));
  REQUIRE(a.has_value());
  CHECK(a->job_id == "42");
  CHECK(a->nodes == Hosts{{"n1", 2}, {"n2", 2}, {"n3", 2}, {"gpu7", 1}});
  CHECK(a->tasks() == 7);
  CHECK(a->has_node("gpu7"));
  CHECK_FALSE(a->has_node("n4"));
  // The older name, and one task per node without the counts.
  auto old = hvrun::slurm_allocation(env_of({{"SLURM_NODELIST", "a,b"}}));
  REQUIRE(old.has_value());
  CHECK(old->nodes == Hosts{{"a", 1}, {"b", 1}});
  CHECK(usage_error([&] {
          hvrun::slurm_allocation(env_of({{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}}));
        }) == "SLURM_TASKS_PER_NODE '2(x2)' gives 2 nodes but SLURM_JOB_NODELIST 'n[1-3]' has 3; give the hosts "
              "with -H instead");
}

TEST_CASE("launcher choice (--launcher): auto picks srun inside an allocation, contradictions are refused", "[slurm]") {
  const auto alloc = hvrun::slurm_allocation(env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}));
  const std::optional<hvrun::SlurmAllocation> none;
  const Hosts in{{"n1", 1}, {"n2", 1}}, with_local{{"localhost", 1}, {"n2", 1}}, out{{"n1", 1}, {"x", 1}};
  CHECK(hvrun::choose_launcher("auto", false, alloc, in) == AgentLauncher::kSlurm);
  CHECK(hvrun::choose_launcher("auto", false, alloc, with_local) == AgentLauncher::kSlurm);
  CHECK(hvrun::choose_launcher("auto", false, alloc, out) == AgentLauncher::kSsh);
  CHECK(hvrun::choose_launcher("auto", false, none, in) == AgentLauncher::kSsh);
  CHECK(hvrun::choose_launcher("auto", true, alloc, in) == AgentLauncher::kRsh);
  CHECK(hvrun::choose_launcher("ssh", false, alloc, in) == AgentLauncher::kSsh);
  CHECK(hvrun::choose_launcher("slurm", false, alloc, in) == AgentLauncher::kSlurm);
  CHECK(hvrun::choose_launcher("rsh", true, none, in) == AgentLauncher::kRsh);
  CHECK_THAT(usage_error([&] { hvrun::choose_launcher("rsh", false, none, in); }),
             Catch::StartsWith("--launcher rsh needs --rsh-agent CMD"));
  CHECK(usage_error([&] { hvrun::choose_launcher("ssh", true, none, in); }) ==
        "--rsh-agent and --launcher ssh exclude each other; drop one of them");
  CHECK_THAT(usage_error([&] { hvrun::choose_launcher("slurm", false, none, in); }),
             Catch::StartsWith("--launcher slurm: not inside a Slurm allocation (SLURM_JOB_NODELIST is unset)"));
  CHECK_THAT(usage_error([&] { hvrun::choose_launcher("slurm", false, alloc, out); }),
             Catch::StartsWith("--launcher slurm: host 'x' is not a node of Slurm job 7"));
  CHECK(hvrun::launcher_name(AgentLauncher::kSlurm) == "slurm");
}

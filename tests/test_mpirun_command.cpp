// --mpi's mpirun command line, built from what the probes chose.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/nic/ip_subnet.hpp"
#include "launcher/ranks/mpirun_command.hpp"

using Args = std::vector<std::string>;
using hvrun::MpirunInput;

namespace {

MpirunInput three_hosts() {
  MpirunInput in;
  in.hosts = {{"h0", 2, "eth1", "10.77.0.10"}, {"h1", 2, "enp6s0", "10.77.0.11"}, {"h2", 1, "enp5s0", "10.77.0.12"}};
  in.shared_subnet = hvrun::IpSubnet::parse("10.77.0.0/24");
  in.command = {"./allreduce", "--size", "4"};
  return in;
}

// The value after the first occurrence of `flag` (and `key`, for -mca/-x pairs).
std::string after(const Args& a, const std::string& flag, const std::string& key = "") {
  for (std::size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] != flag) continue;
    if (key.empty()) return a[i + 1];
    if (a[i + 1] == key && i + 2 < a.size()) return a[i + 2];
  }
  return "<absent>";
}

bool has_x(const Args& a, const std::string& item) {
  for (std::size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == "-x" && a[i + 1] == item) return true;
  return false;
}

}  // namespace

TEST_CASE("mpirun line: hosts, subnets, NICs, ssh, environment, pass-through", "[mpi]") {
  MpirunInput in = three_hosts();
  in.ssh_port = 2222;
  in.ssh_identity_file = "/k/id_ed25519";
  in.known_hosts = "/home/u/.ssh/known_hosts";
  in.allow_run_as_root = true;
  in.forwarded = {"PATH", "PYTHONPATH", "HOROVOD_CONTROLLER", "MY_VAR"};
  in.horovod_env = {{"HOROVOD_FUSION_THRESHOLD", "67108864"}};
  in.user_env = {{"MY_VAR", "x y"}, {"NCCL_DEBUG", std::nullopt}, {"HOROVOD_CPU_OPERATIONS", "gloo"}};
  in.mpi_args = "--map-by ppr:2:node --report-bindings";
  const Args a = hvrun::mpirun_argv(in);
  CHECK(a.front() == "mpirun");
  CHECK(a[1] == "--allow-run-as-root");
  CHECK(std::find(a.begin(), a.end(), "--tag-output") != a.end());
  CHECK(after(a, "-np") == "5");
  CHECK(after(a, "-H") == "h0:2,h1:2,h2:1");
  CHECK(after(a, "--bind-to") == "none");
  CHECK(after(a, "-mca", "btl_tcp_if_include") == "10.77.0.0/24");
  CHECK(after(a, "-mca", "oob_tcp_if_include") == "10.77.0.0/24");
  CHECK(after(a, "-mca", "pml") == "ob1");
  CHECK(after(a, "-mca", "plm_rsh_args") ==
        "-o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/home/u/.ssh/known_hosts -p 2222 "
        "-i /k/id_ed25519");
  CHECK(has_x(a, "HOROVOD_CONTROLLER=mpi"));
  CHECK(has_x(a, "HOROVOD_CPU_OPERATIONS=gloo"));  // the user's -x wins
  CHECK(has_x(a, "NCCL_SOCKET_IFNAME==eth1,enp6s0,enp5s0"));
  CHECK(has_x(a, "PYTHONUNBUFFERED=1"));
  CHECK(has_x(a, "HOROVOD_FUSION_THRESHOLD=67108864"));
  CHECK(has_x(a, "MY_VAR=x y"));
  CHECK(has_x(a, "NCCL_DEBUG"));  // -x NAME: mpirun passes its own value
  CHECK(has_x(a, "PATH"));
  CHECK(has_x(a, "PYTHONPATH"));
  CHECK_FALSE(has_x(a, "HOROVOD_CONTROLLER"));  // set above; not forwarded a second time
  CHECK_FALSE(has_x(a, "MY_VAR"));
  // --mpi-args, then the command, at the end.
  const Args tail(a.end() - 6, a.end());
  CHECK(tail == Args{"--map-by", "ppr:2:node", "--report-bindings", "./allreduce", "--size", "4"});
}

TEST_CASE("mpirun line: defaults and options", "[mpi]") {
  MpirunInput in = three_hosts();
  Args a = hvrun::mpirun_argv(in);
  CHECK(a[1] == "--tag-output");  // no --allow-run-as-root unless asked for or root
  CHECK(after(a, "-mca", "plm_rsh_args") == "-o BatchMode=yes -o StrictHostKeyChecking=accept-new");
  CHECK(std::find(a.begin(), a.end(), "--timestamp-output") == a.end());
  in.ssh_strict_host_key = true;
  in.prefix_timestamp = true;
  in.output_filename = "logs";
  in.binding_args = "--bind-to core --map-by socket";
  a = hvrun::mpirun_argv(in);
  CHECK(after(a, "-mca", "plm_rsh_args") == "-o BatchMode=yes -o StrictHostKeyChecking=yes");
  CHECK(std::find(a.begin(), a.end(), "--timestamp-output") != a.end());
  CHECK(after(a, "--output-filename") == "logs");
  CHECK(after(a, "--bind-to") == "core");
  CHECK(after(a, "--map-by") == "socket");
  in.rsh_agent = "docker exec -i";
  a = hvrun::mpirun_argv(in);
  CHECK(after(a, "-mca", "plm_rsh_agent") == "docker exec -i");
  CHECK(after(a, "-mca", "plm_rsh_args") == "<absent>");
}

TEST_CASE("mpirun line: NICs on different subnets are refused with what to do", "[mpi]") {
  MpirunInput in = three_hosts();
  in.hosts[2] = {"h2", 1, "eth3", "10.99.0.12"};
  in.shared_subnet.reset();
  try {
    hvrun::mpirun_argv(in);
    FAIL("accepted");
  } catch (const hvrun::Error& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("share no IPv4 subnet") && Catch::Contains("h2: eth3 10.99.0.12") &&
                        Catch::Contains("--network-interface"));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("shell_line quotes what a shell would change, and shell_words reads it back", "[mpi]") {
  const Args argv{"mpirun", "-mca", "btl", "^openib", "-x", "MY_VAR=x y", "-x", "Q=it's", "a$b", "", "=eth1,eth2"};
  const std::string line = hvrun::shell_line(argv);
  CHECK(line == "mpirun -mca btl '^openib' -x 'MY_VAR=x y' -x 'Q=it'\\''s' 'a$b' '' =eth1,eth2");
  CHECK(hvrun::shell_words(line, "test") == argv);
  CHECK_THROWS_AS(hvrun::shell_words("a 'b", "--mpi-args"), hvrun::UsageError);
  CHECK_THROWS_AS(hvrun::shell_words("$(reboot)", "--mpi-args"), hvrun::UsageError);
}

TEST_CASE("mpirun line with the ranks observed: one app context per host, each with every -x, the marker and "
          "its own crash handler before the user's LD_PRELOAD", "[mpi]") {
  MpirunInput in = three_hosts();
  in.marker = "feedc0de";
  in.hosts[0].rank_library = "/tmp/hvrun-A/libhvrun_crash.so";
  in.hosts[0].stack_dir = "/tmp/hvrun-A/stacks";
  in.hosts[1].rank_library = "/dev/shm/hvrun-B/libhvrun_crash.so";
  in.hosts[1].stack_dir = "/dev/shm/hvrun-B/stacks";  // h2's agent made none: no preload there
  in.user_env = {{"LD_PRELOAD", "/opt/mine.so"}, {"MY_VAR", "1"}};
  in.mpi_args = "-mca btl_tcp_eager_limit 65536";
  const Args a = hvrun::mpirun_argv(in);
  // Split at ":" into the global part with the first context, then the others.
  std::vector<Args> contexts(1);
  for (const std::string& w : a) {
    if (w == ":") contexts.emplace_back();
    else contexts.back().push_back(w);
  }
  REQUIRE(contexts.size() == 3);
  CHECK(after(contexts[0], "-mca", "btl_tcp_if_include") == "10.77.0.0/24");
  CHECK(after(contexts[0], "-mca", "btl_tcp_eager_limit") == "65536");  // --mpi-args stay global
  CHECK(std::count(a.begin(), a.end(), "-np") == 3);
  const std::vector<std::string> np{"2", "2", "1"}, host{"h0:2", "h1:2", "h2:1"};
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const Args& c = contexts[i];
    CHECK(after(c, "-np") == np[i]);
    CHECK(after(c, "-H") == host[i]);
    CHECK(has_x(c, "HOROVOD_CONTROLLER=mpi"));  // every -x again: mpirun gives a context only its own
    CHECK(has_x(c, "MY_VAR=1"));
    CHECK(has_x(c, "HVRUN_MPI_MARKER=feedc0de"));
    CHECK(Args(c.end() - 3, c.end()) == in.command);
  }
  CHECK(has_x(contexts[0], "LD_PRELOAD=/tmp/hvrun-A/libhvrun_crash.so:/opt/mine.so"));
  CHECK(has_x(contexts[0], "HVRUN_STACK_DIR=/tmp/hvrun-A/stacks"));
  CHECK_FALSE(has_x(contexts[0], "LD_PRELOAD=/opt/mine.so"));
  CHECK(has_x(contexts[1], "LD_PRELOAD=/dev/shm/hvrun-B/libhvrun_crash.so:/opt/mine.so"));
  CHECK(has_x(contexts[2], "LD_PRELOAD=/opt/mine.so"));  // the user's alone
  CHECK(after(contexts[2], "-x", "HVRUN_STACK_DIR") == "<absent>");
  for (const std::string& w : contexts[2]) CHECK_FALSE(w.starts_with("HVRUN_STACK_DIR="));
  // Without a marker the line is the single-context one.
  in.marker.clear();
  const Args plain = hvrun::mpirun_argv(in);
  CHECK(std::find(plain.begin(), plain.end(), ":") == plain.end());
  CHECK(after(plain, "-H") == "h0:2,h1:2,h2:1");
}

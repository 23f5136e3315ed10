// A flood on every port of an agent during a job that restarts its ranks (issue 41, "bounded for
// strangers"): a second Unix user (NeighbourUser) on one of the job's own lab hosts opens 3,000
// connections to each listening port of rank 0's agent and holds them open, once during the first
// attempt and once more, on the new store's port, before the second attempt's ranks use the store. The
// job restarts and finishes; the agent's descriptors stay within the stranger bounds; hvrun's stderr has
// a few refusal lines per port, each with the peer and a count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "agent/probe_listener.hpp"
#include "agent/store_server.hpp"
#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/neighbour_user.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr int kFlood = 3000;  // connections per port

// Opens N connections to each PORT of ADDRESS without blocking, says "opened", holds them HOLD seconds.
// Its own soft limit on open files goes up to its hard one first.
constexpr const char* kFlooder = R"(
import resource, socket, sys, time
address, ports, n, hold = sys.argv[1], [int(p) for p in sys.argv[2].split(',')], int(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for port in ports:
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((address, port))
        held.append(s)
time.sleep(1)
print('opened', len(held), flush=True)
time.sleep(hold)
)";

// Descriptors `pid` holds now.
std::size_t fd_count(pid_t pid) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

// The TCP ports `pid` listens on, from `ss -ltnpH` in lab host `host`'s namespace.
std::set<int> listening_ports(const Lab& lab, int host, pid_t pid) {
  const auto r = run(lab.on_host(host, {"ss", "-ltnpH"}), 10s);
  std::set<int> ports;
  std::istringstream lines(r.out);
  const std::regex local(R"(:(\d+)$)");
  for (std::string line; std::getline(lines, line);) {
    if (line.find("pid=" + std::to_string(pid) + ",") == std::string::npos) continue;
    std::istringstream words(line);
    std::string state, recv_q, send_q, address;
    words >> state >> recv_q >> send_q >> address;
    std::smatch m;
    if (std::regex_search(address, m, local)) ports.insert(std::stoi(m[1]));
  }
  return ports;
}

std::string joined(const std::set<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

// Lines of `text` that hold every one of `parts`.
int lines_with(const std::string& text, const std::vector<std::string>& parts) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
    n += all;
  }
  return n;
}

}  // namespace

TEST_CASE("a flood of 3,000 connections on each port of an agent, from another user on a job host, costs a "
          "restarting job nothing, the agent's descriptors stay bounded, refusals are logged with counts",
          "[lab][flood]") {
  HVRUN_SKIP_WITHOUT_LAB();
  if (!fs::exists("/usr/bin/python3")) {
    WARN("skipped: the flooder needs /usr/bin/python3");
    return;
  }
  Lab lab{3};
  TempHome home;
  SharedDir shared("flood");
  NeighbourUser neighbour(Lab::default_prefix());
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string marker = unique_marker();
  const fs::path flooder = shared.dir / "flood.py";
  std::ofstream(flooder) << kFlooder;
  // The neighbour reads the flooder from here (it writes nothing).
  fs::permissions(shared.dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  // Attempt 0: rank 1 fails once the test says the first flood is on; attempt 1: every rank waits for
  // the second flood, then runs the allreduce benchmark (the store on rank 0's host under flood).
  const fs::path rank_script = shared.dir / "rank.sh";
  const std::string d = shared.dir.string();
  std::ofstream(rank_script) << "#!/bin/sh\n"
                                "wait_for() { i=0; while [ ! -e " << d << "/$1 ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; }\n"
                                "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                                "  echo attempt0 rank=$HVRUN_RANK\n"
                                "  if [ \"$HVRUN_RANK\" = 1 ]; then wait_for go1; exit 3; fi\n"
                                "  exec sleep 120\n"
                                "fi\n"
                                "echo attempt1 rank=$HVRUN_RANK\n"
                                "wait_for go2\n"
                                "exec " << build().collectives_bin_dir << "/hvrun-allreduce-bench -b 4 -e 64K -f 4 -n 2 -w 1\n";
  fs::permissions(rank_script, fs::perms::owner_all);

  ChildProcess hvrun(hvrun_on(lab, home,
                              {"--verbose", "--kill-grace", "2", "--max-restarts", "1", "-np", "4", "-H",
                               h1 + ":2," + h2 + ":2", "-x", marker, rank_script.string()}));
  REQUIRE(hvrun.wait_for_stdout("attempt0", 4, 120s));
  const auto agents = agent_pids(hvrun.stderr_so_far());
  REQUIRE(agents.count(h1) == 1);
  const pid_t agent = agents.at(h1);  // rank 0's: probe port and store
  const std::size_t fds_before = fd_count(agent);

  // The flooder runs as the neighbour on lab host 2, a host of the job: another user of the same
  // cluster node, whose address the job's own ranks share.
  const auto address_of_h1 = run(lab.on_host(2, {"getent", "ahostsv4", h1}), 10s).out;
  const std::string h1_address = address_of_h1.substr(0, address_of_h1.find(' '));
  const auto address_of_h2 = run(lab.on_host(2, {"getent", "ahostsv4", h2}), 10s).out;
  const std::string h2_address = address_of_h2.substr(0, address_of_h2.find(' '));
  auto flood = [&](const std::set<int>& ports) {
    std::vector<std::string> as_neighbour{"setpriv", "--reuid=" + std::to_string(neighbour.uid()),
                                          "--regid=" + std::to_string(neighbour.gid()), "--clear-groups", "--",
                                          "/usr/bin/python3", flooder.string(), h1_address, joined(ports),
                                          std::to_string(kFlood), "60"};
    return std::make_unique<ChildProcess>(lab.on_host(2, as_neighbour));
  };
  // The most descriptors the agent holds while `flooder` says it has opened its connections, and for
  // 3 s after.
  auto peak_fds = [&](ChildProcess& f) {
    REQUIRE(f.wait_for_stdout("opened", 1, 60s));
    std::size_t peak = 0;
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < until) {
      peak = std::max(peak, fd_count(agent));
      std::this_thread::sleep_for(20ms);
    }
    return peak;
  };
  // The bound: the agent's own descriptors, one address's worth of connections to each port (probe
  // 64, store 1,024, Horovod rendezvous 1,024: h2 is a job host, so the rendezvous answers it), and room
  // for the ranks' pipes of a restart.
  const std::size_t bound = fds_before + hvrun::ProbeListener::kStrangerLimits.per_peer +
                            hvrun::StoreServerOptions{}.max_unauthenticated_per_peer + 1024 + 64;

  const std::set<int> ports0 = listening_ports(lab, 1, agent);
  INFO("agent " << agent << " on " << h1 << " listens on " << joined(ports0));
  REQUIRE(ports0.size() >= 2);  // the probe port and the store
  auto flood0 = flood(ports0);
  const std::size_t peak0 = peak_fds(*flood0);
  std::ofstream(shared.dir / "go1").put('\n');  // rank 1 fails: every rank restarts, under the flood

  REQUIRE(hvrun.wait_for_stdout("attempt1", 4, 120s));
  const std::set<int> ports1 = listening_ports(lab, 1, agent);  // the restart's new store
  INFO("after the restart it listens on " << joined(ports1));
  auto flood1 = flood(ports1);
  const std::size_t peak1 = peak_fds(*flood1);
  std::ofstream(shared.dir / "go2").put('\n');

  auto r = hvrun.wait(180s);
  INFO(r.out << r.err);
  WARN("agent descriptors: " << fds_before << " before the floods, at most " << peak0 << " during the first ("
                             << ports0.size() << " ports), " << peak1 << " during the second; the bound " << bound);
  {
    std::string said;
    std::istringstream in(r.err);
    for (std::string line; std::getline(in, line);)
      if (line.find("refused") != std::string::npos) said += line + "\n";
    WARN("hvrun's refusal lines:\n" << said);
  }
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("restart 1 of 1: 4 ranks started again"));
  CHECK_THAT(r.out, Catch::Contains("# Out of bounds values : 0 OK"));
  CHECK(peak0 <= bound);
  CHECK(peak1 <= bound);
  // A few lines per port, each naming the peer, with counts: not one per connection.
  const std::string probe_port = "to the probe port on " + h1;
  const std::string store = "to the store on " + h1;
  CHECK(lines_with(r.err, {"refused", probe_port}) >= 1);
  CHECK(lines_with(r.err, {"refused", probe_port}) <= 6);
  CHECK(lines_with(r.err, {"refused", store}) >= 1);
  CHECK(lines_with(r.err, {"refused", store}) <= 8);
  CHECK(lines_with(r.err, {"refused", "connections from " + h2_address, probe_port,
                           "over the limit of 64 unauthenticated connections from one address"}) >= 1);
  CHECK(lines_with(r.err, {"refused", "connections from " + h2_address, store,
                           "over the limit of 1,024 unauthenticated connections from one address"}) >= 1);
  CHECK(lines_with(r.err, {"refused"}) <= 16);
  CHECK(wait_until_gone(marker, 5s).empty());
}

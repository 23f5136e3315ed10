// The bad-input catalogue: the real hvrun binary, end to end, over a table of things users get wrong
// (malformed flags and host lists, hostfile errors, hosts that cannot be reached or refuse us, NICs and
// commands that do not exist, options that contradict each other). Every case must end within its
// deadline with its exit code, say what is wrong in one line that names the bad value and the flag or
// the fix, show no crash text, and leave nothing running (a marker in every process's environment).
// Cases that need other hosts run on one network-namespace lab (root); the rest need only this host.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/sshd_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using hvrun::testing::TempDir;
using hvrun::testing::write_text;

namespace {

struct BadInput {
  std::string name;
  std::vector<std::string> args;  // hvrun's arguments (the marker's -x is put in front)
  int exit_code;                  // 2: usage; 1: could not start; 127: cannot execute (README's table)
  std::chrono::milliseconds deadline;
  std::vector<std::string> says;  // all on one line of stderr: the bad value, and the flag or the fix
  int failing_hosts = 0;          // > 0: "cannot start the job on N of M hosts:", then one line per host
  // Lab only: contents of the run's ~/.ssh/known_hosts, and whether hvrun runs in a directory that
  // exists on its own host only (a tmpfs mounted in a private mount namespace).
  std::string known_hosts = {};
  bool cwd_only_here = false;
};

// What hvrun must never show a user: crash and sanitizer text, C++ and libssh internals, stack traces.
const std::vector<std::string> kNoise{"terminate called", "what()",  "Segmentation", "Aborted",   "core dumped",
                                      "std::",            "libssh",  "Assertion",    "Sanitizer", "runtime error:",
                                      "backtrace",        "#0 0x",   "stack trace"};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Exit code, deadline, the message's shape and words, no noise, and no process with the marker left.
void check_outcome(const BadInput& c, const ChildResult& r, const std::string& marker) {
  INFO("stderr:\n" << r.err << "stdout:\n" << r.out);
  CHECK(r.exit_code == c.exit_code);
  CHECK(r.elapsed < c.deadline);
  for (const auto& noise : kNoise) CHECK_THAT(r.err, !Catch::Contains(noise));
  CHECK(r.out.empty());

  const auto lines = lines_of(r.err);
  CHECK(!r.err.empty());
  CHECK(r.err.back() == '\n');
  if (c.failing_hosts == 0) {
    CHECK(lines.size() == 1);
  } else {
    CHECK(lines.size() == 1 + static_cast<std::size_t>(c.failing_hosts));
    CHECK_THAT(lines.at(0), Catch::Matches("hvrun: cannot start the job on " + std::to_string(c.failing_hosts) +
                                           " of [0-9]+ hosts:"));
    for (std::size_t i = 1; i < lines.size(); ++i) CHECK_THAT(lines[i], Catch::Matches("    [^ ].*"));
  }
  CHECK_THAT(lines.at(0), Catch::StartsWith(c.exit_code == 2 ? "hvrun: error: " : "hvrun: "));
  const bool one_line_says_all = std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return std::all_of(c.says.begin(), c.says.end(),
                       [&](const std::string& s) { return line.find(s) != std::string::npos; });
  });
  CAPTURE(c.says);
  CHECK(one_line_says_all);
  CHECK(wait_until_gone(marker, 3s).empty());
}

// Processes in lab host i's network namespace other than its sshd (listener and session processes):
// agents or ranks that outlived the run. Polled, since a closed session takes a moment to go.
std::vector<std::string> strays_on(const Lab& lab, int i) {
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  for (;;) {
    std::vector<std::string> strays;
    std::istringstream pids(run({"/usr/bin/env", "ip", "netns", "pids", lab.host(i)}, 10s).out);
    for (std::string pid; pids >> pid;) {
      std::string comm = hvrun::testing::read_text("/proc/" + pid + "/comm");
      if (!comm.empty() && comm.back() == '\n') comm.pop_back();
      if (!comm.empty() && comm != "sshd") strays.push_back(pid + " " + comm);
    }
    if (strays.empty() || std::chrono::steady_clock::now() >= deadline) return strays;
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace

TEST_CASE("bad-input catalogue on this host", "[integration][bad-input]") {
  TempDir dir;
  const fs::path home = dir.path() / "home";
  fs::create_directories(home / ".ssh");
  // A ProxyJump whose hop does not resolve: libssh hides the proxy's stderr, hvrun says how to see it.
  write_text((home / ".ssh" / "config").string(),
             "Host bad_jump\n  HostName 127.0.0.1\n  ProxyJump no-such-jump.invalid\n");
  const std::string bad_line = (dir.path() / "hosts.bad").string();
  write_text(bad_line, "a slots=2\n# a comment\nb slots=x\n");
  const std::string bad_key = (dir.path() / "hosts.key").string();
  write_text(bad_key, "a slots=2 max_slots=4\n");
  const std::string empty = (dir.path() / "hosts.empty").string();
  write_text(empty, "# nothing here\n\n");
  const std::string missing = (dir.path() / "no-such-hostfile").string();
  const std::string no_key = (dir.path() / "no-such-key").string();
  // Directories hvrun would write in that every user can write in (issue 41: refused, named).
  const std::string open_out = (dir.path() / "open-out").string();
  const std::string open_logs = (dir.path() / "open-logs").string();
  for (const std::string& open : {open_out, open_logs}) {
    fs::create_directories(open);
    fs::permissions(open, fs::perms::all);
  }
  const std::string sync_dir = (dir.path() / "proj").string();
  fs::create_directories(sync_dir);
  write_text(sync_dir + "/train.py", "print('x')\n");

  const auto usage = 5s;
  const std::vector<BadInput> cases{
      // Host lists.
      {"-H item with ':' but no slots", {"-H", "a:", "true"}, 2, usage,
       {"-H", "'a:'", "slots must be a positive integer"}},
      {"-H item without a host name", {"-H", ":4", "true"}, 2, usage, {"-H", "':4'", "missing host name"}},
      {"-H zero slots", {"-H", "a:0", "true"}, 2, usage, {"-H", "'a:0'", "slots must be a positive integer"}},
      {"-H slots not a number", {"-H", "a:x", "true"}, 2, usage, {"-H", "'a:x'", "slots must be a positive integer"}},
      {"-H two colons", {"-H", "a:4:5", "true"}, 2, usage, {"-H", "'a:4:5'", "[fe80::1]:2"}},
      {"-H empty", {"-H", "", "true"}, 2, usage, {"-H", "empty host list", "host[:slots]"}},
      {"-H empty item", {"-H", "a,,b", "true"}, 2, usage, {"-H", "'a,,b'", "empty item"}},
      {"-H unclosed IPv6 bracket", {"-H", "[fe80::1", "true"}, 2, usage, {"-H", "'[fe80::1'", "missing ']'"}},
      // Numbers.
      {"-p 0", {"-p", "0", "-H", "a", "true"}, 2, usage, {"-p/--ssh-port", "'0'", "1-65535"}},
      {"-p 70000", {"-p", "70000", "-H", "a", "true"}, 2, usage, {"-p/--ssh-port", "'70000'", "1-65535"}},
      {"--start-timeout not a number", {"--start-timeout", "abc", "true"}, 2, usage,
       {"--start-timeout", "'abc'", "number of seconds > 0"}},
      {"--start-timeout negative", {"--start-timeout", "-1", "true"}, 2, usage,
       {"--start-timeout", "'-1'", "number of seconds > 0"}},
      {"--ssh-connect-timeout 0", {"--ssh-connect-timeout", "0", "true"}, 2, usage,
       {"--ssh-connect-timeout", "'0'", "> 0"}},
      {"--connect-concurrency 0", {"--connect-concurrency", "0", "true"}, 2, usage,
       {"--connect-concurrency", "0", "1 to 100000"}},
      {"--kill-grace not a number", {"--kill-grace", "soon", "true"}, 2, usage, {"--kill-grace", "'soon'", ">= 0"}},
      {"-np 0", {"-np", "0", "true"}, 2, usage, {"-np/--num-proc", "'0'", "positive integer"}},
      {"-np without a value", {"-np"}, 2, usage, {"-np/--num-proc", "needs a value"}},
      // Other flags.
      {"unknown option", {"--bogus", "true"}, 2, usage, {"'--bogus'", "did you mean"}},
      {"-x with a bad variable name", {"-x", "1A=2", "true"}, 2, usage, {"-x/--env", "'1A=2'", "not a variable name"}},
      {"--hvrun-log-level unknown", {"--hvrun-log-level", "loud", "true"}, 2, usage, {"--hvrun-log-level", "loud", "trace"}},
      {"--log-level unknown", {"--log-level", "loud", "true"}, 2, usage, {"--log-level", "loud", "WARNING"}},
      {"no command", {"-np", "2"}, 2, usage, {"no command given", "hvrun [options] command"}},
      {"-i names no file", {"-i", no_key, "-H", "a", "true"}, 2, usage,
       {"-i/--ssh-identity-file", "'" + no_key + "'", "No such file", "path of a private key"}},
      {"--network-interface bad subnet", {"--network-interface", "10.0.0.0/33", "true"}, 2, usage,
       {"--network-interface", "'10.0.0.0/33'", "0..32"}},
      // Hostfiles.
      {"--hostfile missing", {"--hostfile", missing, "true"}, 2, usage,
       {"--hostfile", "'" + missing + "'", "No such file"}},
      {"--hostfile bad slots, with its line number", {"--hostfile", bad_line, "true"}, 2, usage,
       {bad_line + ":3", "'b slots=x'", "slots must be a positive integer"}},
      {"--hostfile unknown key", {"--hostfile", bad_key, "true"}, 2, usage,
       {bad_key + ":1", "'max_slots'", "only slots=N"}},
      {"--hostfile without hosts", {"--hostfile", empty, "true"}, 2, usage, {empty, "no hosts", "host slots=N"}},
      // Conflicts.
      {"-H with --hostfile", {"-H", "a", "--hostfile", bad_line, "true"}, 2, usage,
       {"-H/--hosts and --hostfile exclude each other"}},
      {"--sync naming no directory", {"--sync", missing, "-H", "localhost", "true"}, 2, usage,
       {"--sync " + missing + ": No such file or directory; give a directory that exists here"}},
      {"--sync naming a file", {"--sync", sync_dir + "/train.py", "-H", "localhost", "true"}, 2, usage,
       {"--sync " + sync_dir + "/train.py: not a directory; give the directory that holds it"}},
      {"--sync over --sync-limit", {"--sync", sync_dir, "--sync-limit", "4", "-H", "localhost", "true"}, 2, usage,
       {"--sync: the directories hold 11 bytes in 1 file, more than --sync-limit 4 bytes; sync a smaller "
        "directory or raise --sync-limit"}},
      // --max-restarts and --min-np.
      {"--max-restarts not a number", {"--max-restarts", "two", "true"}, 2, usage,
       {"--max-restarts", "'two'", "a whole number of restarts, 0 or more"}},
      {"--max-restarts negative", {"--max-restarts", "-1", "true"}, 2, usage,
       {"--max-restarts", "'-1'", "0 or more"}},
      {"--max-restarts with --mpi", {"--max-restarts", "1", "--mpi", "-H", "localhost", "true"}, 2, usage,
       {"--max-restarts", "mpirun runs the ranks", "drop --mpi"}},
      {"--min-np above -np", {"--max-restarts", "1", "--min-np", "5", "-np", "4", "-H", "localhost:4", "true"}, 2,
       usage, {"--min-np 5 exceeds the job's 4 ranks", "at most 4"}},
      {"--min-np zero", {"--max-restarts", "1", "--min-np", "0", "-H", "localhost:4", "true"}, 2, usage,
       {"--min-np", "'0'", "1 or more"}},
      // Horovod elastic (--host-discovery-script, or --min-np without --max-restarts).
      {"--min-np without --max-restarts on one host", {"--min-np", "2", "-H", "localhost:4", "true"}, 2, usage,
       {"--min-np without --host-discovery-script", "at least 2 hosts", "--max-restarts"}},
      {"--max-np without an elastic job", {"--max-np", "4", "-H", "a,b", "true"}, 2, usage,
       {"--max-np applies to a Horovod elastic job; add --host-discovery-script"}},
      {"--max-restarts with --host-discovery-script",
       {"--max-restarts", "1", "--host-discovery-script", "./d.sh", "-np", "2", "true"}, 2, usage,
       {"--max-restarts restarts every rank", "choose one mode"}},
      {"--host-discovery-script with -H", {"--host-discovery-script", "./d.sh", "-np", "2", "-H", "a,b", "true"}, 2,
       usage, {"-H/--hostfile cannot; drop one"}},
      {"--max-np below -np", {"--host-discovery-script", "./d.sh", "-np", "4", "--max-np", "2", "true"}, 2, usage,
       {"--max-np 2 is below -np 4"}},
      {"an elastic job without -np", {"--host-discovery-script", "./d.sh", "true"}, 2, usage,
       {"needs -np N or --min-np N"}},
      {"--blacklist-cooldown-range reversed",
       {"--host-discovery-script", "./d.sh", "-np", "2", "--blacklist-cooldown-range", "10", "5", "true"}, 2, usage,
       {"--blacklist-cooldown-range 10 5: the maximum is below the minimum"}},
      {"--elastic-timeout not a number", {"--host-discovery-script", "./d.sh", "-np", "2", "--elastic-timeout", "soon", "true"},
       2, usage, {"--elastic-timeout: 'soon' is not a whole number of seconds"}},
      {"--sync-limit not a size", {"--sync", sync_dir, "--sync-limit", "lots", "true"}, 2, usage,
       {"--sync-limit", "lots"}},
      {"--sync with --rsh-agent", {"--sync", sync_dir, "--rsh-agent", "ssh", "-H", "a,b", "true"}, 2, usage,
       {"--sync copies files over hvrun's own SSH, which --rsh-agent replaces; copy the directory to the hosts "
        "yourself, or start with --launcher ssh"}},
      {"--sync with --dry-run", {"--sync", sync_dir, "--dry-run", "true"}, 2, usage,
       {"--sync copies files to the hosts, which --dry-run never contacts; drop one of them"}},
      {"--check-only with --dry-run", {"--check-only", "--dry-run", "-H", "localhost"}, 2, usage,
       {"--check-only and --dry-run exclude each other", "give one of them"}},
      {"--json without --check-only", {"--json", "true"}, 2, usage, {"--json", "add --check-only"}},
      {"-np beyond the slots under --no-oversubscribe", {"--no-oversubscribe", "-np", "3", "-H", "localhost:2", "true"},
       2, usage, {"-np 3", "2 slots", "--no-oversubscribe"}},
      // Past parsing: the job starts on this host and is refused or fails.
      {"--network-interface naming no NIC of the host", {"--network-interface", "nosuchnic0", "true"}, 2, 15s,
       {"--network-interface", "'nosuchnic0'", "it has: lo", "list a NIC of every host"}},
      {"command not found: refused before any rank starts", {"-np", "1", "hvrun-no-such-command-xyz"}, 2, 15s,
       {"localhost: ", "'hvrun-no-such-command-xyz'", "is not on the ranks' PATH there", "give its full path"}},
      {"command not found, its name not UTF-8 (bytes reach the message as they are)",
       {"-np", "1", "hvrun-no-such-\xe9"}, 2, 15s, {"localhost: ", "'hvrun-no-such-\xe9'", "PATH"}},
      {"a Python script that does not exist: refused before any rank starts",
       {"-np", "1", "/usr/bin/python3", "hvrun-no-such-script.py"}, 2, 15s,
       {"localhost: the script ", "hvrun-no-such-script.py cannot be read there (No such file or directory)",
        "copy it there"}},
      {"command is a directory", {"-np", "1", dir.path().string()}, 127, 15s,
       {"rank 0 on localhost", "'" + dir.path().string() + "'", "Permission denied", "chmod +x"}},
      {"host name that does not resolve", {"-H", "no-such-host.invalid", "true"}, 1, 15s,
       {"no-such-host.invalid: cannot resolve host name 'no-such-host.invalid'", "~/.ssh/config"}, 1},
      {"host name OpenSSH refuses (ssh -G)", {"-H", "bad|name", "true"}, 1, 15s,
       {"bad|name: ssh refuses this host", "hostname contains invalid characters", "with: ssh -G "}, 1},
      {"name with '_' that no ssh config alias gives a HostName", {"-H", "no_such_alias", "true"}, 1, 15s,
       {"no_such_alias: matches no Host with a HostName in the ssh config", "give it a HostName"}, 1},
      {"--output-filename in a directory every user can write in", {"-np", "1", "--output-filename", open_out, "true"},
       2, usage,
       {"--output-filename: " + open_out + " has mode 0777, writable by others than its owner",
        "run chmod go-w " + open_out}},
      {"--log-dir in a directory every user can write in", {"--nproc-per-node", "1", "--log-dir", open_logs, "true"},
       2, usage, {"--log-dir: " + open_logs + " has mode 0777, writable by others than its owner",
                  "run chmod go-w " + open_logs}},
      {"ProxyJump through a host that does not resolve", {"-H", "bad_jump", "true"}, 1, 15s,
       {"bad_jump: SSH handshake with 127.0.0.1 (via ProxyJump no-such-jump.invalid) port 22 failed",
        "(the ProxyJump's ssh said: ssh: Could not resolve hostname no-such-jump.invalid"}, 1},
  };
  REQUIRE(cases.size() >= 25);

  const auto started = std::chrono::steady_clock::now();
  for (const BadInput& c : cases) {
    INFO("case: " << c.name);
    const std::string marker = unique_marker();
    std::vector<std::string> argv{hvrun_bin(), "-x", marker};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    // The marker is in hvrun's own environment too, so its local agents and ranks carry it.
    const auto r = run(argv, c.deadline + 10s, {marker, "HOME=" + home.string()});
    check_outcome(c, r, marker);
  }
  WARN("bad-input catalogue on this host: " << cases.size() << " cases in "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()
       << " ms");
}

TEST_CASE("bad-input catalogue across lab hosts", "[lab][bad-input]") {
  HVRUN_SKIP_WITHOUT_LAB();
  // A prefix of its own: other lab tests (prefix hvtest) may run at the same time.
  Lab lab(2, Lab::default_prefix() + "bad");
  const std::string h1 = lab.host(1), port = lab.var("LAB_PORT"), key = lab.var("LAB_KEY");
  const std::string closed_port = std::to_string(std::stoi(port) + 1);
  const std::string dropping = lab.list("LAB_DROP_ADDRS").at(1);  // h1's eth9: every packet dropped
  const std::string h0_nic = lab.list("LAB_FABRIC_IFACES").at(0), h1_nic = lab.list("LAB_FABRIC_IFACES").at(1);
  REQUIRE(h0_nic != h1_nic);

  TempDir dir;
  const fs::path stranger = dir.path() / "stranger";
  hvrun::testing::make_key(stranger);  // a key h1 does not authorize; its public half also poses as a wrong host key
  std::string stranger_pub = hvrun::testing::read_text(stranger.string() + ".pub");
  stranger_pub = stranger_pub.substr(0, stranger_pub.rfind(' '));  // "ssh-ed25519 AAAA..."
  const std::vector<std::string> ssh{"-p", port, "-i", key};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };

  const std::vector<BadInput> cases{
      {"closed port: nothing listening", {"-p", closed_port, "-i", key, "-H", h1, "true"}, 1, 10s,
       {h1 + ": connection refused", "port " + closed_port, "check -p"}, 1},
      {"address that drops packets", with(ssh, {"--ssh-connect-timeout", "1", "-H", dropping, "true"}), 1, 6s,
       {dropping + ": no answer from " + dropping + " port " + port + " within 1 s", "--ssh-connect-timeout"}, 1},
      {"key the host does not authorize", {"-p", port, "-i", stranger.string(), "-H", h1, "true"}, 1, 10s,
       {h1 + ": permission denied (publickey)", "ssh-copy-id -p " + port + " " + h1}, 1},
      {"changed host key", with(ssh, {"-H", h1, "true"}), 1, 10s,
       {h1 + ": host key changed", "now shows ssh-ed25519 SHA256:", "ssh-keygen -R '[" + h1 + "]:" + port + "'"}, 1,
       "[" + h1 + "]:" + port + " " + stranger_pub + "\n"},
      {"unknown host key under --ssh-strict-host-key-checking",
       with(ssh, {"--ssh-strict-host-key-checking", "-H", h1, "true"}), 1, 10s,
       {h1 + ": host key unknown", "policy: --ssh-strict-host-key-checking), and unknown hosts are refused",
        "ssh-keyscan -p " + port}, 1},
      {"host name that does not resolve, beside a good host", with(ssh, {"-H", h1 + ",no-such-host.invalid", "true"}),
       1, 15s, {"no-such-host.invalid: cannot resolve host name", "~/.ssh/config"}, 1},
      {"--agent-path that does not exist there",
       with(ssh, {"--agent-path", "/nonexistent/hvrun-agent", "-H", h1, "true"}), 1, 15s,
       {h1 + ": hvrun-agent ended before it said hello", "check --agent-path /nonexistent/hvrun-agent"}, 1},
      {"--network-interface naming a NIC one host lacks",
       with(ssh, {"-H", "localhost," + h1, "--network-interface", h0_nic, "true"}), 2, 15s,
       {"--network-interface", "host " + h1 + " has no NIC matching '" + h0_nic + "'", "it has: lo, " + h1_nic,
        "list a NIC of every host"}},
      {"one host under two names (its name and its address)",
       with(ssh, {"-H", h1 + "," + lab.list("LAB_FABRIC_ADDRS").at(1), "true"}), 2, 15s,
       {"hosts '" + h1 + "' and '" + lab.list("LAB_FABRIC_ADDRS").at(1) + "' are one machine",
        "list it once with the slots added: -H " + h1 + ":2"}},
      {"command not found on a remote host", with(ssh, {"-H", h1, "hvrun-no-such-command-xyz"}), 2, 15s,
       {h1 + ": 'hvrun-no-such-command-xyz' is not on the ranks' PATH there", "give its full path"}},
      {"working directory missing on a remote host", with(ssh, {"-H", "localhost," + h1, "sleep", "30"}), 2, 15s,
       {"working directory '", "' does not exist on " + h1, "create it there"}, 0, "", true},
  };

  const fs::path cwd_mount = dir.path() / "cwd";  // exists everywhere; its tmpfs, only inside hvrun's namespace
  fs::create_directories(cwd_mount);
  const auto started = std::chrono::steady_clock::now();
  for (const BadInput& c : cases) {
    INFO("case: " << c.name);  // one lab for every case: sections would bring it up once per case
    const std::string marker = unique_marker();
    TempDir home;  // fresh per case: known_hosts from one case must not change the next
    fs::create_directories(home.path() / ".ssh");
    if (!c.known_hosts.empty()) write_text(home.path() / ".ssh" / "known_hosts", c.known_hosts);
    std::vector<std::string> cmd{"/usr/bin/env", "HOME=" + home.path().string(), marker, hvrun_bin(), "-x", marker};
    cmd.insert(cmd.end(), c.args.begin(), c.args.end());
    if (c.cwd_only_here) {
      cmd.insert(cmd.begin(), {"unshare", "-m", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs hvbad-cwd \"$1\" && mkdir \"$1/job\" && cd \"$1/job\" && shift && "
                               "exec \"$@\"",
                               "sh", cwd_mount.string()});
    }
    const auto r = run(lab.on_host(0, cmd), c.deadline + 10s);
    check_outcome(c, r, marker);
    CHECK(strays_on(lab, 0).empty());
    CHECK(strays_on(lab, 1).empty());
  }
  WARN("bad-input catalogue on the lab: " << cases.size() << " cases in "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()
       << " ms");
}

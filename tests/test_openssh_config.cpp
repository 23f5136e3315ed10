// OpenSSH's view of a host (`ssh -G`): reading its dump, the ProxyJump command, and the matching rules
// hvrun shares with OpenSSH (aliases with '_', case-sensitive Host patterns, Include, Match host).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "launcher/ssh/host_key_policy.hpp"
#include "launcher/ssh/openssh_config.hpp"
#include "tests/support/usage_error.hpp"

using namespace std::chrono_literals;
using hvrun::OpenSshHostConfig;
using hvrun::parse_openssh_dump;
using hvrun::proxy_jump_command;
using hvrun::query_openssh_config;
namespace fs = std::filesystem;

namespace {

const char* const kDefaultsDump =
    "host gpu_node1\nuser alice\nhostname 10.0.0.1\nport 2222\n"
    "identityfile ~/.ssh/id_rsa\nidentityfile ~/.ssh/id_ecdsa\nidentityfile ~/.ssh/id_ecdsa_sk\n"
    "identityfile ~/.ssh/id_ed25519\nidentityfile ~/.ssh/id_ed25519_sk\nidentityfile ~/.ssh/id_xmss\n"
    "identityfile ~/.ssh/id_dsa\nuserknownhostsfile /home/alice/.ssh/known_hosts /home/alice/.ssh/known_hosts2\n"
    "connecttimeout none\n";

bool have_ssh_client() { return ::access("/usr/bin/ssh", X_OK) == 0; }

// A config file of its own, removed at the end.
struct ConfigDir {
  fs::path dir = fs::temp_directory_path() / ("hvrun-openssh-" + std::to_string(::getpid()));
  ConfigDir() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~ConfigDir() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

}  // namespace

TEST_CASE("openssh config: the dump's fields, OpenSSH's defaults left out", "[openssh_config]") {
  OpenSshHostConfig c = parse_openssh_dump(kDefaultsDump, "/home/alice");
  CHECK(c.hostname == "10.0.0.1");
  CHECK(c.port == 2222);
  CHECK(c.user == "alice");
  CHECK(c.identity_files.empty());
  CHECK(c.user_known_hosts.empty());
  CHECK(c.global_known_hosts.empty());
  CHECK(c.strict_host_key_checking.empty());
  CHECK(c.proxy_command.empty());
  CHECK(c.proxy_jump.empty());
  CHECK(c.host_key_alias.empty());

  c = parse_openssh_dump(
      "user bob\nhostname [fd77::1]\nport 22\nidentityfile ~/.ssh/lab_key\nidentityfile /keys/other\n"
      "userknownhostsfile /etc/hvrun/known_hosts /x\nproxycommand nc %h %p\nproxyjump a_b:2200,u@c_d\n"
      "hostkeyalias trainers\n",
      "/home/bob");
  CHECK(c.hostname == "fd77::1");
  CHECK(c.identity_files == std::vector<std::string>{"~/.ssh/lab_key", "/keys/other"});
  CHECK(c.user_known_hosts == std::vector<std::string>{"/etc/hvrun/known_hosts", "/x"});
  CHECK(c.proxy_command == "nc %h %p");
  CHECK(c.proxy_jump == "a_b:2200,u@c_d");
  CHECK(c.host_key_alias == "trainers");

  c = parse_openssh_dump("user u\nhostname h\nport 22\nproxycommand none\nproxyjump none\n", "/h");
  CHECK(c.proxy_command.empty());
  CHECK(c.proxy_jump.empty());
  CHECK_THROWS_WITH(parse_openssh_dump("user u\nport 22\n", "/h"), Catch::Contains("no 'hostname' line"));
  CHECK_THROWS_WITH(parse_openssh_dump("user u\nhostname h\nport 70000\n", "/h"), Catch::Contains("port '70000'"));
}

TEST_CASE("openssh config: ProxyJump becomes nested ssh -W, each hop with its own options", "[openssh_config]") {
  CHECK(hvrun::proxy_jump_hops("u@a_b:2200,c_d,ssh://e:22") ==
        std::vector<std::string>{"ssh://u@a_b:2200", "c_d", "ssh://e:22"});
  CHECK(proxy_jump_command({{"gpu_node1", "-o StrictHostKeyChecking=accept-new"}}, "") ==
        "exec ssh -o BatchMode=yes -o LogLevel=ERROR -o StrictHostKeyChecking=accept-new -W '[%h]:%p' -- 'gpu_node1'");
  // Two hops: the last is reached through a ProxyCommand to the first, whose tokens are escaped once more
  // (libssh expands the whole line; the last hop's ssh expands its own ProxyCommand).
  CHECK(proxy_jump_command({{"ssh://u@a_b:2200", "-o A=1"}, {"c_d", "-o B=2"}}, "/tmp/cfg") ==
        "exec ssh -o BatchMode=yes -o LogLevel=ERROR -o B=2 -F '/tmp/cfg' -o 'ProxyCommand=ssh -o "
        "BatchMode=yes -o LogLevel=ERROR -o A=1 -F '\\''/tmp/cfg'\\'' -W '\\''[%%h]:%%p'\\'' -- "
        "'\\''ssh://u@a_b:2200'\\''' -W '[%h]:%p' -- 'c_d'");
}

TEST_CASE("openssh config: StrictHostKeyChecking and the known-hosts files as hvrun applies them", "[openssh_config]") {
  using hvrun::HostKeyChecking;
  using hvrun::host_key_policy;
  const std::string dump = "user u\nhostname h\nport 22\n";
  const std::string defaults =
      "userknownhostsfile /home/u/.ssh/known_hosts /home/u/.ssh/known_hosts2\n"
      "globalknownhostsfile /etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2\n";
  auto policy = [&](const std::string& lines, bool flag = false) {
    return host_key_policy("node1", parse_openssh_dump(dump + lines, "/home/u"), flag, "/work/home/.ssh");
  };
  // Nothing in the config: hvrun's default, accept-new, into <ssh dir>/known_hosts; the global files read.
  hvrun::HostKeyPolicy p = policy(defaults);
  CHECK(p.checking == HostKeyChecking::kAcceptNew);
  CHECK(p.source == "hvrun's default (StrictHostKeyChecking accept-new)");
  CHECK(p.user_files == std::vector<std::string>{"/work/home/.ssh/known_hosts"});
  CHECK(p.global_files == std::vector<std::string>{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"});
  CHECK(hvrun::openssh_options(p) ==
        "-o StrictHostKeyChecking=accept-new -o 'UserKnownHostsFile=/work/home/.ssh/known_hosts' "
        "-o 'GlobalKnownHostsFile=/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2'");
  // The config's values, as ssh -G prints them.
  CHECK(policy(defaults + "stricthostkeychecking true\n").checking == HostKeyChecking::kYes);
  CHECK(policy(defaults + "stricthostkeychecking true\n").source == "StrictHostKeyChecking yes in the ssh config");
  p = policy(defaults + "stricthostkeychecking ask\n");
  CHECK(p.checking == HostKeyChecking::kYes);
  CHECK(p.source == "StrictHostKeyChecking ask in the ssh config (taken as yes: hvrun cannot ask)");
  CHECK(policy(defaults + "stricthostkeychecking accept-new\n").checking == HostKeyChecking::kAcceptNew);
  CHECK(policy(defaults + "stricthostkeychecking false\n").checking == HostKeyChecking::kNo);
  CHECK(hvrun::openssh_options(policy("stricthostkeychecking false\n")).starts_with("-o StrictHostKeyChecking=no "));
  // --ssh-strict-host-key-checking wins over the config.
  p = policy(defaults + "stricthostkeychecking false\n", true);
  CHECK(p.checking == HostKeyChecking::kYes);
  CHECK(p.source == "--ssh-strict-host-key-checking");
  // Several files each (as ssh -G prints them, expanded), `none`, and ~ against hvrun's ssh dir.
  p = policy("userknownhostsfile /home/u/kh1 /tmp/u-kh2 ~/kh3\nglobalknownhostsfile none\n");
  CHECK(p.user_files == std::vector<std::string>{"/home/u/kh1", "/tmp/u-kh2", "/work/home/kh3"});
  CHECK(p.global_files.empty());
  CHECK(p.files_text() == "/home/u/kh1, /tmp/u-kh2 and /work/home/kh3");
  CHECK(hvrun::openssh_options(p) ==
        "-o StrictHostKeyChecking=accept-new -o 'UserKnownHostsFile=/home/u/kh1 /tmp/u-kh2 /work/home/kh3' "
        "-o 'GlobalKnownHostsFile=none'");
  p = policy("userknownhostsfile none\nglobalknownhostsfile none\n");
  CHECK(p.files().empty());
  CHECK(p.files_text() == "no file (UserKnownHostsFile and GlobalKnownHostsFile are none)");
  CHECK(hvrun::test::usage_error([&] { policy("stricthostkeychecking maybe\n"); }) ==
        "node1: StrictHostKeyChecking 'maybe' in the ssh config is not one hvrun knows; use yes, accept-new or no "
        "(see ssh -G node1)");
}

TEST_CASE("openssh config: hosts matched as OpenSSH matches them", "[openssh_config][integration]") {
  if (!have_ssh_client()) {
    WARN("skipped: needs OpenSSH's client (/usr/bin/ssh)");
    return;
  }
  ConfigDir d;
  const std::string included = d.write("included.conf", "Host node.with_underscore\n  HostName 10.0.0.3\n");
  const std::string config = d.write(
      "config", "Include " + included + "\n"
                "Host gpu_node1\n  HostName 10.0.0.1\n  Port 2201\n"
                "Host GPU-Node2\n  HostName 10.0.0.2\n  User trainer\n"
                "Match host mh_*\n  HostName 10.0.0.4\n"
                "Host jumped\n  HostName 10.0.0.5\n  ProxyJump gpu_node1\n");
  auto q = [&](const std::string& host) { return query_openssh_config(host, config, 10s); };
  CHECK(q("gpu_node1").hostname == "10.0.0.1");
  CHECK(q("gpu_node1").port == 2201);
  CHECK(q("GPU-Node2").hostname == "10.0.0.2");
  CHECK(q("GPU-Node2").user == "trainer");
  // Host patterns are case-sensitive in OpenSSH (libssh's own parser would have matched this one);
  // a name that matches nothing is lower-cased, as OpenSSH does.
  CHECK(q("gpu-node2").hostname == "gpu-node2");
  CHECK(q("Gpu_Node3").hostname == "gpu_node3");
  CHECK(q("node.with_underscore").hostname == "10.0.0.3");
  CHECK(q("mh_one").hostname == "10.0.0.4");
  CHECK(q("jumped").proxy_jump == "gpu_node1");
  CHECK(q("alice@gpu_node1").user == "alice");

  // StrictHostKeyChecking: OpenSSH prints "ask" both for its default and for an explicit line; only the
  // line is taken (as yes), the default leaves hvrun's own.
  const std::string strict = d.write("strict", "Host asking\n  StrictHostKeyChecking ask\n"
                                               "Host sure\n  StrictHostKeyChecking yes\n  UserKnownHostsFile ~/a /b\n");
  CHECK(query_openssh_config("asking", strict, 10s).strict_host_key_checking == "ask");
  CHECK(query_openssh_config("other", strict, 10s).strict_host_key_checking.empty());
  CHECK(query_openssh_config("sure", strict, 10s).strict_host_key_checking == "true");
  CHECK(query_openssh_config("sure", strict, 10s).user_known_hosts ==
        std::vector<std::string>{hvrun::passwd_home() + "/a", "/b"});

  // OpenSSH refuses the config or the name: one line naming the host and what to run.
  const std::string broken = d.write("broken", "Host x\n  NoSuchKeyword 1\n");
  const std::string msg = hvrun::test::usage_error([&] { query_openssh_config("x", broken, 10s); });
  CHECK_THAT(msg, Catch::StartsWith("x: ssh refuses this host or its config ('ssh -G' said: ") &&
                      Catch::Contains("Bad configuration option: nosuchkeyword") &&
                      Catch::EndsWith("with: ssh -G -F " + broken + " x"));
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_THAT(hvrun::test::usage_error([&] { query_openssh_config("bad|name", config, 10s); }),
             Catch::StartsWith("bad|name: ssh refuses this host") && Catch::Contains("invalid characters"));
}

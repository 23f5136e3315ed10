// OpenSSH's view of a host (`ssh -G`): reading its dump, the ProxyJump command, and the matching rules
// hvrun shares with OpenSSH (aliases with '_', case-sensitive Host patterns, Include, Match host).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

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
  CHECK(c.known_hosts_file.empty());
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
  CHECK(c.known_hosts_file == "/etc/hvrun/known_hosts");
  CHECK(c.proxy_command == "nc %h %p");
  CHECK(c.proxy_jump == "a_b:2200,u@c_d");
  CHECK(c.host_key_alias == "trainers");

  c = parse_openssh_dump("user u\nhostname h\nport 22\nproxycommand none\nproxyjump none\n", "/h");
  CHECK(c.proxy_command.empty());
  CHECK(c.proxy_jump.empty());
  CHECK_THROWS_WITH(parse_openssh_dump("user u\nport 22\n", "/h"), Catch::Contains("no 'hostname' line"));
  CHECK_THROWS_WITH(parse_openssh_dump("user u\nhostname h\nport 70000\n", "/h"), Catch::Contains("port '70000'"));
}

TEST_CASE("openssh config: ProxyJump becomes ssh -W through the first hop, the rest with -J", "[openssh_config]") {
  CHECK(proxy_jump_command("gpu_node1", {}) ==
        "exec ssh -o BatchMode=yes -o LogLevel=ERROR -o StrictHostKeyChecking=accept-new -W '[%h]:%p' -- 'gpu_node1'");
  CHECK(proxy_jump_command("u@a_b:2200,c'd", {"/tmp/my config", "/tmp/kh", true}) ==
        "exec ssh -o BatchMode=yes -o LogLevel=ERROR -o StrictHostKeyChecking=yes -F '/tmp/my config' "
        "-o UserKnownHostsFile='/tmp/kh' -J 'c'\\''d' -W '[%h]:%p' -- 'ssh://u@a_b:2200'");
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

// One `ssh -G` for the hosts OpenSSH configures alike (launcher/ssh/openssh_config_index.hpp,
// openssh_config_for): which hosts share, the cases where sharing would not be exact (Match, %h tokens,
// CanonicalizeHostname, an Include inside a Host block, capitals, user@host), Include followed, and the
// number of `ssh -G` runs counted through a PATH shim, with each host's answer equal to its own run's.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launcher/ssh/openssh_config.hpp"
#include "launcher/ssh/openssh_config_index.hpp"

using namespace std::chrono_literals;
using hvrun::OpenSshConfigIndex;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path dir = fs::temp_directory_path() / ("hvrun-ssh-index-" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(dir);
    fs::create_directories(dir / ".ssh");
  }
  ~Dir() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string write(const std::string& name, const std::string& text) const {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

// The index of `text` given as ssh -F, with `d` as the home.
OpenSshConfigIndex index_of(const Dir& d, const std::string& text) {
  return OpenSshConfigIndex::read(d.write("config", text), d.dir.string());
}

std::string key_of(const OpenSshConfigIndex& index, const std::string& host) {
  const auto s = index.sharing(host);
  return s ? s->key : "";
}

}  // namespace

TEST_CASE("ssh config index: hosts matched by the same Host lines share, others do not", "[openssh_config]") {
  Dir d;
  const auto index = index_of(d, "Port 2222\n"
                                 "Host gpu*  !gpu9\n  User alice\n"
                                 "Host gpu1 cpu?\n  IdentityFile ~/.ssh/%u_key\n"
                                 "Host bastion\n  HostName 10.0.0.9\n");
  const std::string gpu2 = key_of(index, "gpu2");
  REQUIRE_FALSE(gpu2.empty());
  CHECK(key_of(index, "gpu3") == gpu2);
  CHECK(key_of(index, "gpu1") != gpu2);  // also matches the second Host line
  CHECK(key_of(index, "gpu9") != gpu2);  // negated
  CHECK(key_of(index, "cpu1") == key_of(index, "cpu2"));
  CHECK(key_of(index, "cpu12") != key_of(index, "cpu1"));  // '?' is one character
  CHECK(key_of(index, "other") == key_of(index, "node_7"));  // only the global lines
  CHECK_FALSE(index.sharing("gpu2")->names_hostname);
  CHECK(index.sharing("bastion")->names_hostname);
  for (const char* own : {"GPU2", "alice@gpu2", "fe80::1%eth0", "[fe80::1]", "ssh://gpu2:22", "-oProxyCommand=x", ""}) {
    INFO(own);
    CHECK_FALSE(index.sharing(own));
  }
}

TEST_CASE("ssh config index: what makes a host's config depend on its name leaves it to its own ssh -G",
          "[openssh_config]") {
  Dir d;
  {
    INFO("a %h token in what hvrun reads, only for the hosts it applies to");
    const auto index = index_of(d, "Host jump*\n  ProxyCommand ssh -W %h:%p gw\nHost *\n  ControlPath ~/.ssh/%C\n");
    CHECK_FALSE(index.sharing("jump1"));
    CHECK(index.sharing("node1"));  // ControlPath's %C is not read by hvrun
  }
  {
    INFO("HostName %h.example.com");
    CHECK_FALSE(index_of(d, "Host *\n  HostName %h.example.com\n").sharing("n1"));
  }
  {
    INFO("%d, %u, %i, %l, %L and %% are the same for every host");
    CHECK(index_of(d, "IdentityFile %d/.ssh/%u-%i-%l-%L-%%\n").sharing("n1"));
  }
  for (const char* text : {"Match host n1\n  Port 1\n", "Match exec \"true\"\n  Port 1\n",
                           "CanonicalizeHostname yes\n", "CanonicalizeHostname always\n",
                           "Host n*\n  Include other.conf\n", "Host \"n 1\"\n  Port 1\n"}) {
    INFO(text);
    CHECK_FALSE(index_of(d, text).sharing("n1"));
  }
  CHECK(index_of(d, "CanonicalizeHostname no\n").sharing("n1"));
  CHECK_FALSE(OpenSshConfigIndex::read((d.dir / "missing").string(), d.dir.string()).sharing("n1"));
}

TEST_CASE("ssh config index: top-level Include is followed, relative to ~/.ssh, globbed, and without -F the user's "
          "file and the system's are read",
          "[openssh_config]") {
  Dir d;
  d.write(".ssh/conf.d/a.conf", "Host n1\n  Port 1\n");
  d.write(".ssh/conf.d/b.conf", "Host n2\n  ProxyJump %r@gw\n");
  const auto index = index_of(d, "Include conf.d/*.conf\nHost *\n  User bob\n");
  CHECK(key_of(index, "n1") != key_of(index, "n3"));
  CHECK_FALSE(index.sharing("n2"));
  CHECK(key_of(index, "n3") == key_of(index, "n4"));

  d.write(".ssh/config", "Host a*\n  Port 7\n");
  const std::string system = d.write("etc/ssh_config", "Include " + (d.dir / "etc/extra.conf").string() + "\n");
  d.write("etc/extra.conf", "Host *\n  HostName %n.lan\n");
  const auto both = OpenSshConfigIndex::read("", d.dir.string(), system);
  CHECK_FALSE(both.sharing("a1"));  // the system file's HostName %n applies to every host
  d.write("etc/extra.conf", "Host *\n  ForwardAgent no\n");
  const auto again = OpenSshConfigIndex::read("", d.dir.string(), system);
  CHECK(key_of(again, "a1") == key_of(again, "a2"));
  CHECK(key_of(again, "a1") != key_of(again, "b1"));
  CHECK(key_of(again, "a1") != key_of(both, "a1"));  // an edited file changes the key
}

TEST_CASE("ssh config: one ssh -G for hosts configured alike, each answer as its own run's, and a host whose config "
          "names it runs its own",
          "[openssh_config]") {
  if (::access("/usr/bin/ssh", X_OK) != 0) {
    WARN("skipped: no /usr/bin/ssh (Debian: openssh-client)");
    return;
  }
  Dir d;
  const std::string log = (d.dir / "runs").string();
  const std::string shim = d.write("bin/ssh", "#!/bin/sh\necho \"$*\" >> " + log + "\nexec /usr/bin/ssh \"$@\"\n");
  fs::permissions(shim, fs::perms::owner_all);
  const std::string config = d.write("cfg", "Host w*\n  Port 2200\n  User carol\n"
                                            "Host w9\n  HostName 10.1.2.3\n"
                                            "Host p*\n  ProxyCommand nc %h %p\n");
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  ::setenv("PATH", ((d.dir / "bin").string() + ":" + old_path).c_str(), 1);
  std::vector<std::string> hosts{"w1", "w2", "w3", "w4", "w5", "w6", "w9", "p1", "p2"};
  std::vector<hvrun::OpenSshHostConfig> shared(hosts.size());
  {
    std::vector<std::jthread> threads;  // as the Connector asks: from many threads at once
    for (std::size_t i = 0; i < hosts.size(); ++i)
      threads.emplace_back([&, i] { shared[i] = hvrun::openssh_config_for(hosts[i], config, 10s); });
  }
  std::ifstream in(log);
  int runs = 0;
  for (std::string line; std::getline(in, line);) ++runs;
  ::setenv("PATH", old_path.c_str(), 1);
  CHECK(runs == 1 + 1 + 2);  // w1-w6 share, w9 has a HostName line of its own, p1 and p2 use %h
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    INFO(hosts[i]);
    const auto own = hvrun::query_openssh_config(hosts[i], config, 10s);
    CHECK(shared[i].hostname == own.hostname);
    CHECK(shared[i].port == own.port);
    CHECK(shared[i].user == own.user);
    CHECK(shared[i].proxy_command == own.proxy_command);
    CHECK(shared[i].identity_files == own.identity_files);
  }
  CHECK(shared[0].hostname == "w1");
  CHECK(shared[6].hostname == "10.1.2.3");
}

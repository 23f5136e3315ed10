#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include <unistd.h>

#include "common/error.hpp"
#include "launcher/cli/host_list.hpp"
#include "tests/support/usage_error.hpp"

using hvrun::HostSpec;
using hvrun::UsageError;
using hvrun::test::usage_error;
using Hosts = std::vector<HostSpec>;

TEST_CASE("-H parses host[:slots] lists in order", "[host_list]") {
  CHECK(hvrun::parse_host_list("a") == Hosts{{"a", 1}});
  CHECK(hvrun::parse_host_list("a:4,b:4") == Hosts{{"a", 4}, {"b", 4}});
  CHECK(hvrun::parse_host_list("node-1.example.com:2,10.0.0.7") ==
        Hosts{{"node-1.example.com", 2}, {"10.0.0.7", 1}});
  CHECK(hvrun::parse_host_list(" a:2 , b ") == Hosts{{"a", 2}, {"b", 1}});
  CHECK(hvrun::parse_host_list("a:08") == Hosts{{"a", 8}});
}

TEST_CASE("-H and hostfiles keep ssh config aliases as written: '_', case, user@", "[host_list]") {
  // OpenSSH's Host patterns are case-sensitive: GPU-Node1 and gpu-node1 may be two hosts.
  CHECK(hvrun::parse_host_list("gpu_node1:2,GPU-Node1,gpu-node1,node.with_underscore,root@gpu_node1") ==
        Hosts{{"gpu_node1", 2}, {"GPU-Node1", 1}, {"gpu-node1", 1}, {"node.with_underscore", 1},
              {"root@gpu_node1", 1}});
  CHECK(hvrun::parse_hostfile("gpu_node1 slots=2\nGPU-Node1:3\n", "h") == Hosts{{"gpu_node1", 2}, {"GPU-Node1", 3}});
}

TEST_CASE("-H takes IPv6 literals in brackets", "[host_list]") {
  CHECK(hvrun::parse_host_list("[fe80::1]:2,[::1]") == Hosts{{"fe80::1", 2}, {"::1", 1}});
  CHECK(hvrun::parse_host_list("[fe80::1%eth0]:3") == Hosts{{"fe80::1%eth0", 3}});
}

TEST_CASE("-H merges duplicates into the first occurrence, summing slots", "[host_list]") {
  CHECK(hvrun::parse_host_list("a,b:2,a:3") == Hosts{{"a", 4}, {"b", 2}});
  CHECK(hvrun::parse_host_list("a,a") == Hosts{{"a", 2}});
}

TEST_CASE("-H rejects malformed items with one line naming the item", "[host_list]") {
  const auto [text, item] = GENERATE(table<std::string, std::string>({
      {"a:", "a:"},
      {":4", ":4"},
      {"a:0", "a:0"},
      {"a:-1", "a:-1"},
      {"a:x", "a:x"},
      {"a:4:5", "a:4:5"},
      {"a:+2", "a:+2"},
      {"a:2x", "a:2x"},
      {"a:99999999999", "a:99999999999"},
      {"fe80::1", "fe80::1"},
      {"[fe80::1", "[fe80::1"},
      {"[fe80::1]2", "[fe80::1]2"},
      {"[]:2", "[]:2"},
      {"[fe80::1]:0", "[fe80::1]:0"},
      {"a b:2", "a b:2"},
      {"a,,b", "a,,b"},
      {"a,", "a,"},
      {",a", ",a"},
  }));
  CAPTURE(text);
  const std::string msg = usage_error([&] { hvrun::parse_host_list(text); });
  CHECK(msg.starts_with("-H: "));
  CHECK_THAT(msg, Catch::Contains("'" + item + "'"));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("-H explains why", "[host_list]") {
  CHECK(usage_error([] { hvrun::parse_host_list("a:0"); }) == "-H: 'a:0': slots must be a positive integer");
  CHECK(usage_error([] { hvrun::parse_host_list(":4"); }) == "-H: ':4': missing host name");
  CHECK_THAT(usage_error([] { hvrun::parse_host_list("a:4:5"); }), Catch::Contains("brackets"));
  CHECK(usage_error([] { hvrun::parse_host_list(""); }).starts_with("-H: empty host list"));
  CHECK(usage_error([] { hvrun::parse_host_list("  "); }).starts_with("-H: empty host list"));
  CHECK_THAT(usage_error([] { hvrun::parse_host_list("a,,b"); }), Catch::Contains("empty item"));
}

TEST_CASE("hostfiles: slots=N, host:N, comments, blank lines, whitespace", "[host_list]") {
  const std::string text =
      "# the cluster\n"
      "\n"
      "a slots=4\n"
      "   b\tslots=2   # two GPUs\n"
      "c:3\r\n"
      "d\n"
      "  \t \n"
      "e slots = 5\n"
      "[fe80::1] slots=2\n"
      "a slots=1\n";
  CHECK(hvrun::parse_hostfile(text, "hosts.txt") ==
        Hosts{{"a", 5}, {"b", 2}, {"c", 3}, {"d", 1}, {"e", 5}, {"fe80::1", 2}});
  CHECK(hvrun::parse_hostfile("a slots=2", "h") == Hosts{{"a", 2}});  // no final newline
}

TEST_CASE("hostfile errors name file:line and the line", "[host_list]") {
  const auto [line, why] = GENERATE(table<std::string, std::string>({
      {"a slots=0", "positive integer"},
      {"a slots=x", "positive integer"},
      {"a slots=", "positive integer"},
      {"a slots=-1", "positive integer"},
      {"a max_slots=4", "unknown key 'max_slots'"},
      {"a gpus=4", "unknown key 'gpus'"},
      {"a 4", "unexpected '4'"},
      {"a:2 slots=2", "slots given twice"},
      {"a slots=1 slots=2", "slots given twice"},
      {"a:0", "positive integer"},
      {":4", "missing host name"},
      {"a:4:5", "more than one ':'"},
  }));
  CAPTURE(line);
  const std::string text = "# header\n\nok slots=1\n" + line + "  # trailing\nnever slots=1\n";
  const std::string msg = usage_error([&] { hvrun::parse_hostfile(text, "hosts.txt"); });
  CHECK(msg.starts_with("hosts.txt:4: '"));
  CHECK_THAT(msg, Catch::Contains(why));
  // The message quotes the offending line or its host item.
  const auto first_word = line.substr(0, line.find(' '));
  CHECK_THAT(msg, Catch::Contains("'" + first_word));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("a hostfile with no hosts is an error", "[host_list]") {
  CHECK_THAT(usage_error([] { hvrun::parse_hostfile("# nothing\n\n", "empty.txt"); }),
             Catch::StartsWith("empty.txt: no hosts"));
  CHECK_THAT(usage_error([] { hvrun::parse_hostfile("", "empty.txt"); }), Catch::StartsWith("empty.txt: no hosts"));
}

TEST_CASE("read_hostfile reads a file and reports unreadable ones with strerror", "[host_list]") {
  char path[] = "/tmp/hvrun_hostfile_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  {
    std::ofstream(path) << "x slots=2\ny\n";
  }
  CHECK(hvrun::read_hostfile(path) == Hosts{{"x", 2}, {"y", 1}});
  {
    std::ofstream(path) << "x slots=2\ny slots=zero\n";
  }
  CHECK_THAT(usage_error([&] { hvrun::read_hostfile(path); }), Catch::StartsWith(std::string(path) + ":2: "));
  ::unlink(path);

  CHECK(usage_error([] { hvrun::read_hostfile("/nonexistent/hosts"); }) ==
        "--hostfile: '/nonexistent/hosts': No such file or directory");
  CHECK(usage_error([] { hvrun::read_hostfile("/tmp"); }) == "--hostfile: '/tmp': Is a directory");
}

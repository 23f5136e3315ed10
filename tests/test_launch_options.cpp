#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.hpp"
#include "hvrun/version.hpp"
#include "launcher/cli/launch_options.hpp"

using hvrun::CliAction;
using hvrun::HostSpec;
using Args = std::vector<std::string>;
using Hosts = std::vector<HostSpec>;
using namespace std::chrono_literals;

namespace {

hvrun::CliResult parse(const Args& args) {
  std::vector<const char*> argv{"hvrun"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return hvrun::parse_command_line(static_cast<int>(argv.size()), argv.data());
}

hvrun::LaunchOptions options(const Args& args) {
  auto r = parse(args);
  REQUIRE(r.action == CliAction::kLaunch);
  return r.options;
}

std::string usage_error(const Args& args) {
  try {
    parse(args);
  } catch (const hvrun::UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError for: " << Catch::Detail::stringify(args));
  return {};
}

// Captures what std::cout receives while alive.
class CoutCapture {
 public:
  CoutCapture() : old_(std::cout.rdbuf(out_.rdbuf())) {}
  ~CoutCapture() { std::cout.rdbuf(old_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::streambuf* old_;
};

}  // namespace

TEST_CASE("defaults", "[cli]") {
  const auto o = options({"python", "train.py"});
  CHECK(o.np == 0);
  CHECK(o.hosts == Hosts{{"localhost", 1}});
  CHECK_FALSE(o.no_oversubscribe);
  CHECK_FALSE(o.ssh_port.has_value());
  CHECK(o.ssh_identity_file.empty());
  CHECK(o.network_interfaces.empty());
  CHECK(o.start_timeout == 30s);
  CHECK(o.kill_grace == 3s);
  CHECK(o.env.empty());
  CHECK(o.output_filename.empty());
  CHECK_FALSE(o.prefix_timestamp);
  CHECK_FALSE(o.verbose);
  CHECK(o.log_level == spdlog::level::warn);
  CHECK_FALSE(o.dry_run);
  CHECK_FALSE(o.check_only);
  CHECK(o.command == Args{"python", "train.py"});
}

TEST_CASE("the link test is on unless --no-link-test", "[cli][link]") {
  CHECK(options({"cmd"}).link_test);
  CHECK_FALSE(options({"--no-link-test", "cmd"}).link_test);
  CHECK_FALSE(options({"--no-link-test", "--check-only"}).link_test);
}

TEST_CASE("the probe cache is on unless --disable-cache or HVRUN_DISABLE_CACHE says otherwise", "[cli]") {
  // The suite runs with HVRUN_DISABLE_CACHE=1 (tests/CMakeLists.txt): each case sets it as it needs.
  const char* before = std::getenv("HVRUN_DISABLE_CACHE");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  auto with = [](const char* value, const Args& args) {
    if (value)
      ::setenv("HVRUN_DISABLE_CACHE", value, 1);
    else
      ::unsetenv("HVRUN_DISABLE_CACHE");
    return options(args).disable_cache;
  };
  CHECK_FALSE(with(nullptr, {"cmd"}));
  CHECK_FALSE(with("", {"cmd"}));
  CHECK_FALSE(with("0", {"cmd"}));
  CHECK(with("1", {"cmd"}));
  CHECK(with("yes", {"cmd"}));
  CHECK(with(nullptr, {"--disable-cache", "cmd"}));
  CHECK(with("0", {"--disable-cache", "cmd"}));
  if (saved)
    ::setenv("HVRUN_DISABLE_CACHE", saved->c_str(), 1);
  else
    ::unsetenv("HVRUN_DISABLE_CACHE");
}

TEST_CASE("-np forms; the default host gets np slots", "[cli]") {
  for (const Args& args : {Args{"-np", "4", "cmd"}, Args{"-np=4", "cmd"}, Args{"--num-proc", "4", "cmd"},
                           Args{"--num-proc=4", "cmd"}}) {
    CAPTURE(args);
    const auto o = options(args);
    CHECK(o.np == 4);
    CHECK(o.hosts == Hosts{{"localhost", 4}});
    CHECK(o.command == Args{"cmd"});
  }
  CHECK(options({"-np", "010", "cmd"}).np == 10);  // decimal, not octal
}

TEST_CASE("the command keeps its own flags, even ones hvrun also has", "[cli]") {
  const auto o = options({"-np", "2", "-H", "a:2", "python", "train.py", "--lr", "3", "-np", "7", "-H", "x",
                          "--verbose", "--", "-x"});
  CHECK(o.np == 2);
  CHECK(o.hosts == Hosts{{"a", 2}});
  CHECK_FALSE(o.verbose);
  CHECK(o.command == Args{"python", "train.py", "--lr", "3", "-np", "7", "-H", "x", "--verbose", "--", "-x"});
}

TEST_CASE("-- ends the options, even before a command that starts with '-'", "[cli]") {
  CHECK(options({"-np", "2", "--", "python", "-u"}).command == Args{"python", "-u"});
  CHECK(options({"--", "-weird", "--flag"}).command == Args{"-weird", "--flag"});
  CHECK(options({"--", "--num-proc", "3"}).command == Args{"--num-proc", "3"});
}

TEST_CASE("hosts from -H (repeatable) and --hostfile", "[cli]") {
  CHECK(options({"-H", "a:4,b:4", "cmd"}).hosts == Hosts{{"a", 4}, {"b", 4}});
  CHECK(options({"--hosts=a:2", "cmd"}).hosts == Hosts{{"a", 2}});
  CHECK(options({"-H", "a:1,b", "-H", "a:2", "cmd"}).hosts == Hosts{{"a", 3}, {"b", 1}});
  CHECK(options({"-np", "8", "-H", "a:2", "cmd"}).hosts == Hosts{{"a", 2}});  // np does not change -H
  CHECK(options({"-H", "[fe80::1]", "cmd"}).hosts == Hosts{{"fe80::1", 1}});
  CHECK(options({"-H", "[::1]:2,[fe80::2]", "cmd"}).hosts == Hosts{{"::1", 2}, {"fe80::2", 1}});
  CHECK(usage_error({"-H", "a", "-H", " ", "cmd"}) == "-H: empty host list (expected host[:slots],...)");

  char path[] = "/tmp/hvrun_cli_hostfile_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << "# hosts\nx slots=2\ny\n";
  CHECK(options({"--hostfile", path, "cmd"}).hosts == Hosts{{"x", 2}, {"y", 1}});
  CHECK(usage_error({"--hostfile", path, "-H", "a", "cmd"}) ==
        "-H/--hosts and --hostfile exclude each other; give one of them");
  ::unlink(path);
  CHECK(usage_error({"--hostfile", "/nonexistent/hf", "cmd"}) ==
        "--hostfile: '/nonexistent/hf': No such file or directory");
}

TEST_CASE("-x forms", "[cli]") {
  const auto o = options({"-x", "PATH", "-x", "NCCL_DEBUG=INFO", "--env", "EMPTY=", "--env=A_1=x=y", "-xB=2",
                          "cmd"});
  using Item = std::pair<std::string, std::optional<std::string>>;
  const std::vector<Item> expected{
      {"PATH", std::nullopt}, {"NCCL_DEBUG", "INFO"}, {"EMPTY", ""}, {"A_1", "x=y"}, {"B", "2"}};
  CHECK(o.env == expected);
  CHECK(o.command == Args{"cmd"});
}

TEST_CASE("--network-interface keeps each occurrence whole, in order", "[cli]") {
  // Unsplit: the leading '^' of "^docker0,lo" marks the whole list, so the list must stay one value.
  const auto o = options({"--network-interface", "eth0,^docker", "--network-interface=10.0.0.0/8",
                          "--network-interface", "^=docker0,lo", "--network-interface", "=ib0", "cmd"});
  CHECK(o.network_interfaces == Args{"eth0,^docker", "10.0.0.0/8", "^=docker0,lo", "=ib0"});
  CHECK(o.command == Args{"cmd"});
}

TEST_CASE("--network-interface syntax errors are usage errors at parse time", "[cli]") {
  CHECK(usage_error({"--network-interface", "eth0,,eth1", "cmd"}) ==
        "--network-interface: 'eth0,,eth1': empty item (two commas in a row, or one at either end)");
  CHECK(usage_error({"--network-interface", "10.0.0.0/33", "cmd"}) ==
        "--network-interface: '10.0.0.0/33': prefix length 33 is out of range 0..32");
  CHECK(usage_error({"--network-interface", "eth0", "--network-interface", "^", "cmd"}) ==
        "--network-interface: '^': a mark needs a name, prefix or subnet after it");
}

TEST_CASE("the other options", "[cli]") {
  char key[] = "/tmp/hvrun_cli_key_XXXXXX";
  const int fd = ::mkstemp(key);
  REQUIRE(fd >= 0);
  ::close(fd);
  const auto o = options({"--no-oversubscribe", "-p", "2222", "-i", key, "--start-timeout", "2.5",
                          "--kill-grace", "0", "--output-filename", "logs", "--prefix-output-with-timestamp",
                          "--hvrun-log-level", "debug", "--dry-run", "cmd"});
  ::unlink(key);
  CHECK(o.no_oversubscribe);
  CHECK(o.ssh_port == 2222);
  CHECK(o.ssh_identity_file == key);
  CHECK(o.start_timeout == 2500ms);
  CHECK(o.kill_grace == 0ms);
  CHECK(o.output_filename == "logs");
  CHECK(o.prefix_timestamp);
  CHECK(o.log_level == spdlog::level::debug);
  CHECK(o.dry_run);
  CHECK(options({"--ssh-port=65535", "cmd"}).ssh_port == 65535);
  CHECK(options({"--start-timeout", "0.0001", "cmd"}).start_timeout == 1ms);
  CHECK(options({"--kill-grace", "1.5", "cmd"}).kill_grace == 1500ms);
}

TEST_CASE("--verbose means info unless --hvrun-log-level says otherwise", "[cli]") {
  CHECK(options({"--verbose", "cmd"}).log_level == spdlog::level::info);
  CHECK(options({"--verbose", "cmd"}).verbose);
  CHECK(options({"--verbose", "--hvrun-log-level", "trace", "cmd"}).log_level == spdlog::level::trace);
  CHECK(options({"--hvrun-log-level=error", "--verbose", "cmd"}).log_level == spdlog::level::err);
}

TEST_CASE("an explicit --hvrun-log-level wins over --verbose in either order", "[cli]") {
  CHECK(options({"--verbose", "--hvrun-log-level", "debug", "cmd"}).log_level == spdlog::level::debug);
  CHECK(options({"--hvrun-log-level", "debug", "--verbose", "cmd"}).log_level == spdlog::level::debug);
  CHECK(options({"--hvrun-log-level", "off", "cmd"}).log_level == spdlog::level::off);
  CHECK(options({"cmd"}).log_level == spdlog::level::warn);
}

TEST_CASE("--hvrun-log-subsys selects subsystems; an unknown name is a usage error naming the valid ones", "[cli]") {
  using hvrun::LogSubsys;
  auto only = [](std::initializer_list<LogSubsys> subsystems) {
    hvrun::LogSubsysSet set;
    for (LogSubsys s : subsystems) set.set(static_cast<std::size_t>(s));
    return set;
  };
  CHECK(options({"cmd"}).log_subsys == hvrun::all_log_subsystems());
  CHECK(options({"--hvrun-log-subsys", "ssh,rank", "cmd"}).log_subsys == only({LogSubsys::kSsh, LogSubsys::kRank}));
  CHECK(options({"--hvrun-log-subsys=^store", "cmd"}).log_subsys == ~only({LogSubsys::kStore}));
  const std::string valid = "give a comma list of ssh, start, nic, rank, output, proc, store, rendezvous, or all "
                            "(^LIST: all but those)";
  CHECK(usage_error({"--hvrun-log-subsys", "ssh,bogus", "cmd"}) ==
        "--hvrun-log-subsys: unknown subsystem 'bogus'; " + valid);
  CHECK(usage_error({"--hvrun-log-subsys", "SSH", "cmd"}) == "--hvrun-log-subsys: unknown subsystem 'SSH'; " + valid);
  CHECK(usage_error({"--hvrun-log-subsys", "", "cmd"}) == "--hvrun-log-subsys: no subsystem given; " + valid);
  CHECK(usage_error({"--hvrun-log-subsys", "^", "cmd"}) == "--hvrun-log-subsys: no subsystem given; " + valid);
  CHECK(usage_error({"--hvrun-log-subsys", "ssh,,nic", "cmd"}) ==
        "--hvrun-log-subsys: an empty name in 'ssh,,nic'; " + valid);
}

TEST_CASE("--check-only needs no command", "[cli]") {
  const auto o = options({"--check-only", "-H", "a,b"});
  CHECK(o.check_only);
  CHECK(o.command.empty());
}

TEST_CASE("options that contradict each other are refused, whatever their order", "[cli]") {
  const std::string both = "--check-only and --dry-run exclude each other";
  CHECK_THAT(usage_error({"--check-only", "--dry-run", "-H", "a"}), Catch::StartsWith(both));
  CHECK_THAT(usage_error({"--dry-run", "--check-only", "cmd"}), Catch::StartsWith(both));
  CHECK(usage_error({"--json", "cmd"}) == "--json only applies to --check-only; add --check-only or drop --json");
  CHECK(usage_error({"--dry-run", "--json", "cmd"}) ==
        "--json only applies to --check-only; add --check-only or drop --json");
  CHECK(options({"--check-only", "--json", "-H", "a"}).json);
}

TEST_CASE("no command is a usage error", "[cli]") {
  const std::string expected = "no command given: hvrun [options] command [args...]";
  CHECK(usage_error({}) == expected);
  CHECK(usage_error({"-np", "2"}) == expected);
  CHECK(usage_error({"--dry-run", "--"}) == expected);
}

TEST_CASE("malformed values: one line naming the flag and the value", "[cli]") {
  const auto [args, flag, value] = GENERATE(table<Args, std::string, std::string>({
      {{"-np", "0", "cmd"}, "-np", "0"},
      {{"-np", "-3", "cmd"}, "-np", "-3"},
      {{"-np", "x", "cmd"}, "-np", "x"},
      {{"-np", "0x10", "cmd"}, "-np", "0x10"},
      {{"-np", "2.5", "cmd"}, "-np", "2.5"},
      {{"-np", "99999999999", "cmd"}, "-np", "99999999999"},
      {{"--num-proc=0", "cmd"}, "-np", "0"},
      {{"-p", "0", "cmd"}, "--ssh-port", "0"},
      {{"-p", "65536", "cmd"}, "--ssh-port", "65536"},
      {{"--ssh-port", "ssh", "cmd"}, "--ssh-port", "ssh"},
      {{"--start-timeout", "-1", "cmd"}, "--start-timeout", "-1"},
      {{"--start-timeout", "0", "cmd"}, "--start-timeout", "0"},
      {{"--start-timeout", "nan", "cmd"}, "--start-timeout", "nan"},
      {{"--start-timeout", "inf", "cmd"}, "--start-timeout", "inf"},
      {{"--start-timeout", "5s", "cmd"}, "--start-timeout", "5s"},
      {{"--kill-grace", "-0.5", "cmd"}, "--kill-grace", "-0.5"},
      {{"-x", "1A=2", "cmd"}, "--env", "1A=2"},
      {{"-x", "=2", "cmd"}, "--env", "=2"},
      {{"-x", "A-B=2", "cmd"}, "--env", "A-B=2"},
      {{"--env", "", "cmd"}, "--env", ""},
      {{"--hvrun-log-level", "loud", "cmd"}, "--hvrun-log-level", "loud"},
      {{"--log-level", "loud", "cmd"}, "--log-level", "loud"},
      {{"--network-interface", "", "cmd"}, "--network-interface", ""},
      {{"-i", "/nonexistent/id_rsa", "cmd"}, "--ssh-identity-file", "/nonexistent/id_rsa"},
      {{"-H", "a:0", "cmd"}, "-H", "a:0"},
      {{"-H", "a,,b", "cmd"}, "-H", "a,,b"},
      {{"-H", "", "cmd"}, "-H", ""},
      {{"-H", "a:4:5", "cmd"}, "-H", "a:4:5"},
  }));
  CAPTURE(args);
  const std::string msg = usage_error(args);
  CAPTURE(msg);
  CHECK_THAT(msg, Catch::Contains(flag));
  if (!value.empty()) CHECK_THAT(msg, Catch::Contains(value));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("readable messages for common mistakes", "[cli]") {
  CHECK(usage_error({"-np", "0", "cmd"}) == "-np/--num-proc: '0' is not a positive integer");
  CHECK(usage_error({"-p", "70000", "cmd"}) == "-p/--ssh-port: '70000' is not a port (1-65535)");
  CHECK(usage_error({"-np"}) == "-np/--num-proc: needs a value");
  CHECK(usage_error({"-np", "2", "-np", "3", "cmd"}) == "-np/--num-proc: given more than once");
  CHECK_THAT(usage_error({"--hvrun-log-level", "loud", "cmd"}),
             Catch::StartsWith("--hvrun-log-level: loud not in {trace,"));
  CHECK(usage_error({"--log-level", "loud", "cmd"}) ==
        "--log-level: 'loud' is not one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL (any case)");
}

TEST_CASE("unknown options are usage errors naming the option", "[cli]") {
  CHECK(usage_error({"--bogus", "cmd"}) == "unknown option '--bogus' (did you mean --hosts?)");
  CHECK(usage_error({"-np", "2", "-q", "cmd"}) == "unknown option '-q' (did you mean -h?)");
  CHECK(usage_error({"--bogus"}) == "unknown option '--bogus' (did you mean --hosts?)");
  CHECK(usage_error({"--bogus", "--", "cmd"}) == "unknown option '--bogus' (did you mean --hosts?)");
  CHECK(usage_error({"--bogus", "-np", "2", "cmd"}) == "unknown option '--bogus' (did you mean --hosts?)");
  CHECK(usage_error({"-np4", "cmd"}) == "unknown option '-np4' (did you mean -np?)");
  CHECK(usage_error({"--hostfiel", "f", "cmd"}) == "unknown option '--hostfiel' (did you mean --hostfile?)");
}

TEST_CASE("--help and --version print to stdout and exit 0", "[cli]") {
  SECTION("--version and -v") {
    CoutCapture out;
    const auto r = parse({GENERATE("--version", "-v")});
    CHECK(r.action == CliAction::kExit);
    CHECK(r.exit_code == 0);
    CHECK(out.text() == std::string("hvrun ") + hvrun::kVersion + "\n");
  }
  SECTION("--help and -h") {
    for (const char* flag : {"--help", "-h"}) {
      CoutCapture out;
      const auto r = parse({"-np", "2", flag});
      CHECK(r.action == CliAction::kExit);
      CHECK(r.exit_code == 0);
      CHECK_THAT(out.text(), Catch::Contains("Usage: hvrun [options] [--] command [args...]"));
      CHECK_THAT(out.text(), Catch::Contains("-np,-n,--num-proc N"));
      CHECK_THAT(out.text(), Catch::Contains("--network-interface"));
      CHECK_THAT(out.text(), Catch::Contains("--hostfile"));
    }
  }
  SECTION("--help after the command belongs to the command") {
    CHECK(options({"python", "--help"}).command == Args{"python", "--help"});
  }
}

// hvrun-agent runs on hosts that have none of hvrun's libraries (another distribution or release): it
// needs nothing but glibc. One case reads the built binary's ELF with readelf (binutils: the compiler's
// own linker comes from it); the lab case runs ranks on a host whose sshd cannot see libstdc++, spdlog
// and fmt. Both skip in the sanitizer build, whose agent links the sanitizers' shared runtimes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <tuple>

#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The oldest glibc README and docs/BENCHMARKS.md promise; the binary must not need a newer one.
constexpr std::tuple<int, int> kDocumentedOldestGlibc{2, 35};

std::string agent_path() { return (fs::path(hvrun_bin()).parent_path() / "hvrun-agent").string(); }

// Every capture group 1 of `re` in `text`.
std::vector<std::string> all_matches(const std::string& text, const std::regex& re) {
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[1].str());
  return found;
}

}  // namespace

TEST_CASE("hvrun-agent needs no shared library but glibc's and names the oldest glibc it runs on",
          "[integration]") {
if (!build().agent_self_contained) {
    WARN("skipped: this build (sanitizers or fuzzing) links hvrun-agent with the shared C++ runtime");
    return;
  }
  const std::string agent = agent_path();
  auto dynamic = run({"/usr/bin/readelf", "--dynamic", "--wide", agent}, 30s);
  INFO(dynamic.out << dynamic.err);
  REQUIRE(dynamic.exit_code == 0);
  const auto needed = all_matches(dynamic.out, std::regex(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])"));
  // glibc's own libraries (libpthread, libdl and librt are stubs inside libc since 2.34).
  const std::set<std::string> glibc{"libc.so.6",       "libm.so.6",  "ld-linux-x86-64.so.2",
                                    "libpthread.so.0", "libdl.so.2", "librt.so.1"};
  CHECK(std::count(needed.begin(), needed.end(), "libc.so.6") == 1);
  for (const auto& lib : needed) {
    INFO("hvrun-agent needs " << lib);
    CHECK(glibc.count(lib) == 1);
  }

  auto sections = run({"/usr/bin/readelf", "--section-headers", "--wide", agent}, 30s);
  REQUIRE(sections.exit_code == 0);
  INFO("stripped: no symbol table is copied to every host");
  CHECK_THAT(sections.out, !Catch::Contains(".symtab"));

  // The version needs (.gnu.version_r): "Name: GLIBC_2.34  Flags: none  Version: 5".
  auto versions = run({"/usr/bin/readelf", "--version-info", "--wide", agent}, 30s);
  REQUIRE(versions.exit_code == 0);
  std::tuple<int, int> highest{0, 0};
  for (const auto& v : all_matches(versions.out, std::regex(R"(Name: GLIBC_([0-9]+\.[0-9]+))"))) {
    const auto dot = v.find('.');
    highest = std::max(highest, std::tuple<int, int>{std::stoi(v.substr(0, dot)), std::stoi(v.substr(dot + 1))});
  }
  const auto [major, minor] = highest;
  REQUIRE(major == 2);
  const auto [doc_major, doc_minor] = kDocumentedOldestGlibc;
  WARN("hvrun-agent needs glibc " << major << "." << minor << " or newer (documented: " << doc_major << "."
                                  << doc_minor << "), and no other shared library");
  CHECK(highest <= kDocumentedOldestGlibc);
}

TEST_CASE("the crash handler preloaded into ranks needs only libc, and no newer glibc than the agent",
          "[integration]") {
  // Built in every configuration, never sanitized: it runs inside the ranks' programs.
  const std::string library = build().crash_library;
  auto dynamic = run({"/usr/bin/readelf", "--dynamic", "--wide", library}, 30s);
  INFO(dynamic.out << dynamic.err);
  REQUIRE(dynamic.exit_code == 0);
  CHECK(all_matches(dynamic.out, std::regex(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])")) ==
        std::vector<std::string>{"libc.so.6"});
  auto versions = run({"/usr/bin/readelf", "--version-info", "--wide", library}, 30s);
  REQUIRE(versions.exit_code == 0);
  std::tuple<int, int> highest{0, 0};
  for (const auto& v : all_matches(versions.out, std::regex(R"(Name: GLIBC_([0-9]+\.[0-9]+))"))) {
    const auto dot = v.find('.');
    highest = std::max(highest, std::tuple<int, int>{std::stoi(v.substr(0, dot)), std::stoi(v.substr(dot + 1))});
  }
  CHECK(highest <= kDocumentedOldestGlibc);
  auto symbols = run({"/usr/bin/readelf", "--dyn-syms", "--wide", library}, 30s);
  REQUIRE(symbols.exit_code == 0);
  INFO("no C++ runtime: nothing from libstdc++ or the C++ ABI is imported");
  CHECK_THAT(symbols.out, !Catch::Contains("CXXABI") && !Catch::Contains("_ZSt") && !Catch::Contains("GLIBCXX"));
}

TEST_CASE("a host whose sshd cannot see libstdc++ or spdlog or fmt runs ranks", "[lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
if (!build().agent_self_contained) {
    WARN("skipped: this build (sanitizers or fuzzing) links hvrun-agent with the shared C++ runtime");
    return;
  }
  // The files hvrun itself loads them from (ldd: "libfmt.so.9 => /lib/.../libfmt.so.9 (0x...)").
  auto ldd = run({"/usr/bin/ldd", hvrun_bin()}, 30s);
  REQUIRE(ldd.exit_code == 0);
  std::vector<std::string> hide;
  for (const std::string prefix : {"libstdc++.so", "libspdlog.so", "libfmt.so"}) {
    const auto path = all_matches(ldd.out, std::regex("\\s" + std::regex_replace(prefix, std::regex(R"([.+])"), R"(\$&)") +
                                                      R"([^ ]* => (/[^ ]+))"));
    INFO(ldd.out);
    REQUIRE(path.size() == 1);
    hide.push_back(path[0]);
  }
  const std::string stdcxx_real = fs::canonical(hide[0]).string();

  Lab lab(2);
  TempHome home;
  const std::string h1 = lab.host(1);
  std::vector<std::string> args{"hide-libs", "1"};
  args.insert(args.end(), hide.begin(), hide.end());
  REQUIRE(lab.control(args) == 0);
  {
    INFO("the hiding works: an agent linked with those libraries cannot start there");
    const std::string dynamic_agent =
        (fs::path(hvrun_bin()).parent_path().parent_path() / "tests" / "hvrun_fake_agent").string();
    // Run by the host's sshd directly: hvrun would run only its own agent there (its SHA-256 checked).
    auto r = run(lab.on_host(0, {"ssh", "-p", lab.var("LAB_PORT"), "-i", lab.var("LAB_KEY"), "-o",
                                 "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                                 "-o", "LogLevel=ERROR", h1, dynamic_agent, "--version"}),
                 60s);
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("error while loading shared libraries"));
  }
  // /bin/sh, hostname and wc need only libc; the remote ranks see libstdc++ empty, the local one does not.
  auto r = run(hvrun_on(lab, home,
                        {"-H", "localhost," + h1 + ":2", "sh", "-c",
                         "echo rank=$HVRUN_RANK host=$(hostname) libstdc++ bytes=$(wc -c < " + stdcxx_real + ")"}),
               60s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("[1]<stdout>:rank=1 host=" + h1 + " libstdc++ bytes=0\n") &&
                        Catch::Contains("[2]<stdout>:rank=2 host=" + h1 + " libstdc++ bytes=0\n") &&
                        Catch::Contains("[0]<stdout>:rank=0 host=" + lab.host(0) + " libstdc++ bytes=" +
                                        std::to_string(fs::file_size(stdcxx_real)) + "\n"));
}

// Replays every committed fuzz input through the fuzz targets' bodies (tests/fuzz/fuzz_entries.hpp):
// the seed corpora (tests/fuzz/corpus/<target>/) and every input a fuzzer once crashed on
// (tests/fuzz/regressions/<target>/). A bug the fuzzers found thereby stays fixed in every build,
// with or without clang; under HVRUN_SANITIZE the sanitizers watch the replay too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/fuzz/fuzz_entries.hpp"

#include "tests/support/build_paths.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(hvrun::test::build().source_dir) / "tests" / "fuzz";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const hvrun::fuzz::Target* target_named(const std::string& name) {
  for (const auto& t : hvrun::fuzz::kTargets)
    if (t.name == name) return &t;
  return nullptr;
}

// Replays each file under `root`/<target>/ through that target; returns how many it replayed.
std::size_t replay_all(const fs::path& root) {
  std::size_t replayed = 0;
  if (!fs::exists(root)) return 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    const std::string name = dir.path().filename().string();
    INFO("directory " << dir.path().string());
    const auto* target = target_named(name);
    REQUIRE(target != nullptr);  // every directory is named after a target (fuzz_entries.hpp)
    for (const auto& file : fs::directory_iterator(dir.path())) {
      if (!file.is_regular_file()) continue;
      const std::string input = read_bytes(file.path());
      INFO("input " << file.path().string() << " (" << input.size() << " bytes)");
      CHECK_NOTHROW(target->run(input));
      ++replayed;
    }
  }
  return replayed;
}

}  // namespace

TEST_CASE("every fuzz target has a seed corpus that replays cleanly", "[fuzz]") {
  for (const auto& t : hvrun::fuzz::kTargets) {
    INFO("target " << t.name);
    const fs::path dir = kFuzzDir / "corpus" / std::string(t.name);
    REQUIRE(fs::is_directory(dir));
    CHECK(!fs::is_empty(dir));
  }
  CHECK(replay_all(kFuzzDir / "corpus") > 0);
}

TEST_CASE("inputs that once crashed a fuzzer stay fixed", "[fuzz]") {
  // Empty until a fuzzer finds something; scripts/fuzz.sh says how to add a crash here.
  replay_all(kFuzzDir / "regressions");
}

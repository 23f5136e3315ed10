// What the GPUs do for each process (agent/gpu_usage.hpp): without NVML (everywhere), through a fake
// NVML (tests/fake_nvml.c, everywhere), and through the real one on a machine with a GPU ([gpu]).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/gpu_usage.hpp"

using namespace hvrun;

namespace {

// libhvrun-test-fake-nvml.so, built beside this test program (tests/CMakeLists.txt).
std::string fake_nvml() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "libhvrun-test-fake-nvml.so").string();
}

const GpuProcessUsage* find(const std::vector<GpuProcessUsage>& all, pid_t pid) {
  const auto it = std::find_if(all.begin(), all.end(), [&](const GpuProcessUsage& u) { return u.pid == pid; });
  return it == all.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("gpu usage: without NVML, unavailable with the reason, and sampling gives nothing") {
  GpuUsage gpus("libhvrun-no-such-nvml.so.1");
  CHECK_FALSE(gpus.available());
  CHECK(gpus.unavailable_reason().find("dlopen libhvrun-no-such-nvml.so.1") != std::string::npos);
  CHECK(gpus.unavailable_reason().find('\n') == std::string::npos);  // one line for a log
  CHECK(gpus.device_count() == 0);
  CHECK(gpus.sample().empty());
}

TEST_CASE("gpu usage: a library that is not NVML is unavailable, naming what it lacks") {
  GpuUsage gpus("libc.so.6");
  CHECK_FALSE(gpus.available());
  CHECK(gpus.unavailable_reason().find("lacks nvmlInit_v2") != std::string::npos);
  CHECK(gpus.sample().empty());
}

TEST_CASE("gpu usage: per process SM utilisation and memory, per device, through a fake NVML") {
  GpuUsage gpus(fake_nvml());
  REQUIRE(gpus.available());
  CHECK(gpus.unavailable_reason().empty());
  CHECK(gpus.device_count() == 2);
  for (int window = 0; window < 2; ++window) {  // each window gets its own samples
    const std::vector<GpuProcessUsage> all = gpus.sample();
    CHECK(all.size() == 4);
    const GpuProcessUsage* busy = find(all, 100);
    REQUIRE(busy != nullptr);
    CHECK(busy->device == 0);
    CHECK(busy->sm_percent == 50u);  // the mean of its two samples
    CHECK(busy->memory_mib == 2048);
    const GpuProcessUsage* idle = find(all, 200);
    REQUIRE(idle != nullptr);
    CHECK(idle->sm_percent == 0u);  // holds memory, ran nothing in the window
    CHECK(idle->memory_mib == 512);
    const GpuProcessUsage* sampled_only = find(all, 400);
    REQUIRE(sampled_only != nullptr);
    CHECK(sampled_only->sm_percent == 30u);
    CHECK(sampled_only->memory_mib == 0);
    const GpuProcessUsage* other_gpu = find(all, 300);
    REQUIRE(other_gpu != nullptr);
    CHECK(other_gpu->device == 1);
    CHECK_FALSE(other_gpu->sm_percent);  // that device does not sample processes
    CHECK(other_gpu->memory_mib == 1024);
  }
}

TEST_CASE("gpu usage: NVML on this machine's GPUs", "[gpu]") {
  GpuUsage gpus;
  if (!gpus.available()) {
    WARN("skipped: no NVML/GPU on this machine (" << gpus.unavailable_reason() << ")");
    return;
  }
  REQUIRE(gpus.device_count() >= 1);
  CHECK(gpus.unavailable_reason().empty());
  // Whatever runs on them now (often nothing): well-formed entries, twice (the second a new window).
  for (int window = 0; window < 2; ++window) {
    for (const GpuProcessUsage& u : gpus.sample()) {
      CHECK(u.pid > 0);
      CHECK(u.device < gpus.device_count());
      if (u.sm_percent) CHECK(*u.sm_percent <= 100);
    }
  }
}

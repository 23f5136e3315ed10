#pragma once
// What the host's GPUs do for each process (issue 40: name the rank that holds the others back): SM
// utilisation over a window and device memory, from NVML, loaded with dlopen when the object is made.
// hvrun neither builds nor links against CUDA or NVML: on a host without libnvidia-ml.so.1, or where
// nvmlInit fails (no driver, no GPU), available() is false and unavailable_reason() says why in one line.
//
// Blocking: NVML calls cannot be given a deadline. nvmlInit_v2 (in the constructor) may take a second or
// more on a host without persistence mode, while the driver brings the GPUs up; sample() makes two to
// four calls per device, each usually well under a millisecond. Make the object, and sample, off a loop
// that must answer in time. Not thread-safe.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hvrun {

// One process on one device. A process on two devices has two entries.
struct GpuProcessUsage {
  pid_t pid = 0;          // as NVML reports it: a pid of the host's pid namespace
  unsigned device = 0;    // NVML's device index (PCI order, not CUDA_VISIBLE_DEVICES's numbering)
  // The mean SM utilisation (percent, 0..100) of the samples NVML took of the process in the window;
  // 0 when it took none (the process ran no kernel); absent when the device does not sample processes.
  std::optional<unsigned> sm_percent;
  std::uint64_t memory_mib = 0;  // device memory the process holds now, MiB (0 where NVML cannot tell)
};

class GpuUsage {
 public:
  // NVML's own library, libnvidia-ml.so.1, found as the dynamic loader finds any library.
  GpuUsage();
  // Another library in its place (the tests: a missing one, a fake). Never throws for a library that
  // is missing or broken: that is unavailable_reason().
  explicit GpuUsage(const std::string& library);
  ~GpuUsage();  // nvmlShutdown, then dlclose
  GpuUsage(const GpuUsage&) = delete;
  GpuUsage& operator=(const GpuUsage&) = delete;

  bool available() const { return nvml_ != nullptr; }
  const std::string& unavailable_reason() const { return reason_; }  // "" when available
  unsigned device_count() const;

  // Every compute process of every device, and every process NVML sampled in the window: SM
  // utilisation since the previous call (the first: since construction), memory now. Call it once per
  // window for the whole host and pick the ranks' pids from it: each call starts a new window.
  // Nothing when unavailable. Throws Error naming the NVML call, the device and NVML's message when a
  // call fails otherwise than "no samples" or "not supported" (a GPU fallen off the bus).
  std::vector<GpuProcessUsage> sample();

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  std::string reason_;
};

}  // namespace hvrun

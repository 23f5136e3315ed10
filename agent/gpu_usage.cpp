#include "agent/gpu_usage.hpp"

#include <dlfcn.h>
#include <sys/time.h>

#include <algorithm>
#include <map>
#include <utility>

#include "common/error.hpp"

namespace hvrun {

// The few parts of NVML's ABI used here, declared from NVIDIA's nvml.h (its API reference) rather than
// included, so that hvrun builds where no CUDA is installed. Layouts and values are NVML's, stable since
// the _v2 entry points (driver 450 and later); the names are ours. A named namespace: GpuUsage::Nvml
// holds these types.
namespace nvml_abi {
using NvmlReturn = int;  // nvmlReturn_t, an enum
constexpr NvmlReturn kNvmlSuccess = 0;              // NVML_SUCCESS
constexpr NvmlReturn kNvmlNotSupported = 3;         // NVML_ERROR_NOT_SUPPORTED
constexpr NvmlReturn kNvmlNotFound = 6;             // NVML_ERROR_NOT_FOUND: no samples since the timestamp
constexpr NvmlReturn kNvmlInsufficientSize = 7;     // NVML_ERROR_INSUFFICIENT_SIZE: the count is set
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
using NvmlDevice = struct NvmlDeviceOpaque*;        // nvmlDevice_t

// nvmlProcessUtilizationSample_t
struct NvmlProcessUtilizationSample {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time of the sample, microseconds since the epoch
  unsigned int smUtil;           // percent
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
// nvmlProcessInfo_v2_t, which nvmlDeviceGetComputeRunningProcesses_v2 and _v3 both fill
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(NvmlProcessUtilizationSample) == 32 && sizeof(NvmlProcessInfo) == 24,
              "NVML's structs as laid out on 64-bit Linux");

using InitFn = NvmlReturn (*)();                                   // nvmlInit_v2, nvmlShutdown
using ErrorStringFn = const char* (*)(NvmlReturn);                 // nvmlErrorString
using DeviceCountFn = NvmlReturn (*)(unsigned int*);               // nvmlDeviceGetCount_v2
using DeviceHandleFn = NvmlReturn (*)(unsigned int, NvmlDevice*);  // nvmlDeviceGetHandleByIndex_v2
using ProcessUtilizationFn = NvmlReturn (*)(NvmlDevice, NvmlProcessUtilizationSample*, unsigned int*,
                                            unsigned long long);  // nvmlDeviceGetProcessUtilization
using RunningProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfo*);

}  // namespace nvml_abi

namespace {

using namespace nvml_abi;

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr unsigned kMaxTries = 3;  // a buffer sized from NVML's count can be outgrown by a new process

unsigned long long now_us() {
  timeval now{};
  ::gettimeofday(&now, nullptr);
  return static_cast<unsigned long long>(now.tv_sec) * 1000000ULL + static_cast<unsigned long long>(now.tv_usec);
}

}  // namespace

struct GpuUsage::Nvml {
  using InitFn = nvml_abi::InitFn;
  using ErrorStringFn = nvml_abi::ErrorStringFn;
  using ProcessUtilizationFn = nvml_abi::ProcessUtilizationFn;
  using RunningProcessesFn = nvml_abi::RunningProcessesFn;
  using NvmlDevice = nvml_abi::NvmlDevice;
  using NvmlReturn = nvml_abi::NvmlReturn;

  void* library = nullptr;
  InitFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  ProcessUtilizationFn process_utilization = nullptr;
  RunningProcessesFn running_processes = nullptr;
  const char* running_processes_name = nullptr;
  std::vector<NvmlDevice> devices;
  std::vector<unsigned long long> last_seen;  // per device, NVML's timestamp of the newest sample read

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (library != nullptr) ::dlclose(library);
  }

  std::string message(NvmlReturn r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? std::string(text) : "NVML error " + std::to_string(r);
  }
  [[noreturn]] void fail(const char* call, unsigned device, NvmlReturn r) const {
    throw Error(std::string(call) + " (GPU " + std::to_string(device) + ") failed: " + message(r));
  }
};

GpuUsage::GpuUsage() : GpuUsage("libnvidia-ml.so.1") {}

GpuUsage::GpuUsage(const std::string& library) {
  auto nvml = std::make_unique<Nvml>();
  nvml->library = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml->library == nullptr) {
    const char* why = ::dlerror();
    reason_ = "no NVML: dlopen " + library + ": " + (why != nullptr ? why : "failed");
    return;
  }
  std::string missing;
  const auto symbol = [&](const char* name) {
    void* found = ::dlsym(nvml->library, name);
    if (found == nullptr && missing.empty()) missing = name;
    return found;
  };
  const auto init = reinterpret_cast<InitFn>(symbol("nvmlInit_v2"));
  const auto shutdown = reinterpret_cast<InitFn>(symbol("nvmlShutdown"));
  nvml->error_string = reinterpret_cast<ErrorStringFn>(symbol("nvmlErrorString"));
  const auto count = reinterpret_cast<DeviceCountFn>(symbol("nvmlDeviceGetCount_v2"));
  const auto handle = reinterpret_cast<DeviceHandleFn>(symbol("nvmlDeviceGetHandleByIndex_v2"));
  nvml->process_utilization = reinterpret_cast<ProcessUtilizationFn>(symbol("nvmlDeviceGetProcessUtilization"));
  // _v3 since driver 510; _v2 before, with the same struct.
  nvml->running_processes_name = "nvmlDeviceGetComputeRunningProcesses_v3";
  nvml->running_processes = reinterpret_cast<RunningProcessesFn>(::dlsym(nvml->library, nvml->running_processes_name));
  if (nvml->running_processes == nullptr) {
    nvml->running_processes_name = "nvmlDeviceGetComputeRunningProcesses_v2";
    nvml->running_processes = reinterpret_cast<RunningProcessesFn>(symbol(nvml->running_processes_name));
  }
  if (!missing.empty()) {
    reason_ = "no NVML: " + library + " lacks " + missing + " (a driver older than 450?)";
    return;
  }
  if (const NvmlReturn r = init(); r != kNvmlSuccess) {
    reason_ = "no NVML: nvmlInit_v2 failed: " + nvml->message(r);
    return;
  }
  nvml->shutdown = shutdown;  // from here on the destructor shuts NVML down
  unsigned int devices = 0;
  if (const NvmlReturn r = count(&devices); r != kNvmlSuccess) {
    reason_ = "no NVML: nvmlDeviceGetCount_v2 failed: " + nvml->message(r);
    return;
  }
  const unsigned long long start = now_us();
  for (unsigned int i = 0; i < devices; ++i) {
    NvmlDevice device = nullptr;
    if (const NvmlReturn r = handle(i, &device); r != kNvmlSuccess) {
      reason_ = "no NVML: nvmlDeviceGetHandleByIndex_v2 (GPU " + std::to_string(i) + ") failed: " + nvml->message(r);
      return;
    }
    nvml->devices.push_back(device);
    nvml->last_seen.push_back(start);
  }
  nvml_ = std::move(nvml);
}

GpuUsage::~GpuUsage() = default;

unsigned GpuUsage::device_count() const { return nvml_ ? static_cast<unsigned>(nvml_->devices.size()) : 0; }

std::vector<GpuProcessUsage> GpuUsage::sample() {
  std::vector<GpuProcessUsage> out;
  if (!nvml_) return out;
  Nvml& nvml = *nvml_;
  for (unsigned d = 0; d < nvml.devices.size(); ++d) {
    // pid -> its entry; sums and counts of the window's samples beside.
    std::map<unsigned, GpuProcessUsage> processes;
    std::map<unsigned, std::pair<unsigned long long, unsigned>> sm;  // sum, samples

    // Utilisation samples since the newest one read before: ask the count, then the samples.
    bool sampled = true;
    std::vector<NvmlProcessUtilizationSample> samples;
    for (unsigned tries = 0;; ++tries) {
      unsigned int n = static_cast<unsigned int>(samples.size());
      const NvmlReturn r = nvml.process_utilization(nvml.devices[d], samples.empty() ? nullptr : samples.data(), &n,
                                                    nvml.last_seen[d]);
      if (r == kNvmlSuccess) {
        samples.resize(std::min<std::size_t>(n, samples.size()));
        break;
      }
      if (r == kNvmlNotFound) {  // no process ran on it since
        samples.clear();
        break;
      }
      if (r == kNvmlNotSupported) {
        sampled = false;
        samples.clear();
        break;
      }
      if (r != kNvmlInsufficientSize || tries + 1 == kMaxTries) nvml.fail("nvmlDeviceGetProcessUtilization", d, r);
      samples.resize(n + 8);
    }
    for (const NvmlProcessUtilizationSample& s : samples) {
      nvml.last_seen[d] = std::max(nvml.last_seen[d], s.timeStamp);
      auto& [sum, count] = sm[s.pid];
      sum += std::min(s.smUtil, 100u);
      ++count;
      processes[s.pid].pid = static_cast<pid_t>(s.pid);
    }

    // The compute processes and their memory now.
    std::vector<NvmlProcessInfo> infos;
    for (unsigned tries = 0;; ++tries) {
      unsigned int n = static_cast<unsigned int>(infos.size());
      const NvmlReturn r = nvml.running_processes(nvml.devices[d], &n, infos.empty() ? nullptr : infos.data());
      if (r == kNvmlSuccess) {
        infos.resize(std::min<std::size_t>(n, infos.size()));
        break;
      }
      if (r != kNvmlInsufficientSize || tries + 1 == kMaxTries) nvml.fail(nvml.running_processes_name, d, r);
      infos.resize(n + 8);
    }
    for (const NvmlProcessInfo& p : infos) {
      GpuProcessUsage& usage = processes[p.pid];
      usage.pid = static_cast<pid_t>(p.pid);
      if (p.usedGpuMemory != kNvmlValueNotAvailable) usage.memory_mib += p.usedGpuMemory / kMiB;
    }

    for (auto& [pid, usage] : processes) {
      usage.device = d;
      if (sampled) {
        const auto it = sm.find(pid);
        usage.sm_percent = it == sm.end() ? 0u : static_cast<unsigned>(it->second.first / it->second.second);
      }
      out.push_back(usage);
    }
  }
  return out;
}

}  // namespace hvrun

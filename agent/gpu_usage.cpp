#include "agent/gpu_usage.hpp"

#include <dlfcn.h>
#include <sys/time.h>

#include <algorithm>
#include <map>
#include <utility>

#include "common/error.hpp"

namespace hvrun {

// The few parts of NVML's ABI used here, declared from NVIDIA's lib.h (its API reference) rather than
// included, so that hvrun builds where no CUDA is installed. Layouts and values are NVML's, the same for
// every driver that has the _v2 entry points; the names are ours. A named namespace (GpuUsage::Nvml
// holds these types), never opened with `using` (the agent's sources are compiled in unity batches).
namespace nvml {
using Return = int;  // nvmlReturn_t, an enum
constexpr Return kSuccess = 0;              // NVML_SUCCESS
constexpr Return kNotSupported = 3;         // NVML_ERROR_NOT_SUPPORTED
constexpr Return kNotFound = 6;             // NVML_ERROR_NOT_FOUND: no samples since the timestamp
constexpr Return kInsufficientSize = 7;     // NVML_ERROR_INSUFFICIENT_SIZE: the count is set
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
using Device = struct DeviceOpaque*;        // nvmlDevice_t

// nvmlProcessUtilizationSample_t
struct ProcessUtilizationSample {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time of the sample, microseconds since the epoch
  unsigned int smUtil;           // percent
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
// nvmlProcessInfo_v2_t, which nvmlDeviceGetComputeRunningProcesses_v2 and _v3 both fill
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(ProcessUtilizationSample) == 32 && sizeof(ProcessInfo) == 24,
              "NVML's structs as laid out on 64-bit Linux");

using InitFn = Return (*)();                                   // nvmlInit_v2, nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                 // nvmlErrorString
using DeviceCountFn = Return (*)(unsigned int*);               // nvmlDeviceGetCount_v2
using DeviceHandleFn = Return (*)(unsigned int, Device*);  // nvmlDeviceGetHandleByIndex_v2
using ProcessUtilizationFn = Return (*)(Device, ProcessUtilizationSample*, unsigned int*,
                                            unsigned long long);  // nvmlDeviceGetProcessUtilization
using RunningProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);

}  // namespace nvml

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr unsigned kMaxTries = 3;  // a buffer sized from NVML's count can be outgrown by a new process

unsigned long long now_us() {
  timeval now{};
  ::gettimeofday(&now, nullptr);
  return static_cast<unsigned long long>(now.tv_sec) * 1000000ULL + static_cast<unsigned long long>(now.tv_usec);
}

}  // namespace

struct GpuUsage::Nvml {

  void* library = nullptr;
  nvml::InitFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::ProcessUtilizationFn process_utilization = nullptr;
  nvml::RunningProcessesFn running_processes = nullptr;
  const char* running_processes_name = nullptr;
  std::vector<nvml::Device> devices;
  std::vector<unsigned long long> last_seen;  // per device, NVML's timestamp of the newest sample read

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (library != nullptr) ::dlclose(library);
  }

  std::string message(nvml::Return r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? std::string(text) : "NVML error " + std::to_string(r);
  }
  [[noreturn]] void fail(const char* call, unsigned device, nvml::Return r) const {
    throw Error(std::string(call) + " (GPU " + std::to_string(device) + ") failed: " + message(r));
  }
};

GpuUsage::GpuUsage() : GpuUsage("libnvidia-ml.so.1") {}

GpuUsage::GpuUsage(const std::string& library) {
  auto loaded = std::make_unique<Nvml>();
  loaded->library = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (loaded->library == nullptr) {
    const char* why = ::dlerror();
    reason_ = "no NVML: dlopen " + library + ": " + (why != nullptr ? why : "failed");
    return;
  }
  std::string missing;
  const auto symbol = [&](const char* name) {
    void* found = ::dlsym(loaded->library, name);
    if (found == nullptr && missing.empty()) missing = name;
    return found;
  };
  const auto init = reinterpret_cast<nvml::InitFn>(symbol("nvmlInit_v2"));
  const auto shutdown = reinterpret_cast<nvml::InitFn>(symbol("nvmlShutdown"));
  loaded->error_string = reinterpret_cast<nvml::ErrorStringFn>(symbol("nvmlErrorString"));
  const auto count = reinterpret_cast<nvml::DeviceCountFn>(symbol("nvmlDeviceGetCount_v2"));
  const auto handle = reinterpret_cast<nvml::DeviceHandleFn>(symbol("nvmlDeviceGetHandleByIndex_v2"));
  loaded->process_utilization = reinterpret_cast<nvml::ProcessUtilizationFn>(symbol("nvmlDeviceGetProcessUtilization"));
  // _v3 in newer drivers, _v2 in older ones; both fill the same struct.
  loaded->running_processes_name = "nvmlDeviceGetComputeRunningProcesses_v3";
  loaded->running_processes = reinterpret_cast<nvml::RunningProcessesFn>(::dlsym(loaded->library, loaded->running_processes_name));
  if (loaded->running_processes == nullptr) {
    loaded->running_processes_name = "nvmlDeviceGetComputeRunningProcesses_v2";
    loaded->running_processes = reinterpret_cast<nvml::RunningProcessesFn>(symbol(loaded->running_processes_name));
  }
  if (!missing.empty()) {
    reason_ = "no NVML: " + library + " lacks " + missing + " (a driver too old for hvrun?)";
    return;
  }
  if (const nvml::Return r = init(); r != nvml::kSuccess) {
    reason_ = "no NVML: nvmlInit_v2 failed: " + loaded->message(r);
    return;
  }
  loaded->shutdown = shutdown;  // from here on the destructor shuts NVML down
  unsigned int devices = 0;
  if (const nvml::Return r = count(&devices); r != nvml::kSuccess) {
    reason_ = "no NVML: nvmlDeviceGetCount_v2 failed: " + loaded->message(r);
    return;
  }
  const unsigned long long start = now_us();
  for (unsigned int i = 0; i < devices; ++i) {
    nvml::Device device = nullptr;
    if (const nvml::Return r = handle(i, &device); r != nvml::kSuccess) {
      reason_ = "no NVML: nvmlDeviceGetHandleByIndex_v2 (GPU " + std::to_string(i) + ") failed: " + loaded->message(r);
      return;
    }
    loaded->devices.push_back(device);
    loaded->last_seen.push_back(start);
  }
  nvml_ = std::move(loaded);
}

GpuUsage::~GpuUsage() = default;

unsigned GpuUsage::device_count() const { return nvml_ ? static_cast<unsigned>(nvml_->devices.size()) : 0; }

std::vector<GpuProcessUsage> GpuUsage::sample() {
  std::vector<GpuProcessUsage> out;
  if (!nvml_) return out;
  Nvml& lib = *nvml_;
  for (unsigned d = 0; d < lib.devices.size(); ++d) {
    // pid -> its entry; sums and counts of the window's samples beside.
    std::map<unsigned, GpuProcessUsage> processes;
    std::map<unsigned, std::pair<unsigned long long, unsigned>> sm;  // sum, samples

    // Utilisation samples since the newest one read before: ask the count, then the samples.
    bool sampled = true;
    std::vector<nvml::ProcessUtilizationSample> samples;
    for (unsigned tries = 0;; ++tries) {
      unsigned int n = static_cast<unsigned int>(samples.size());
      const nvml::Return r = lib.process_utilization(lib.devices[d], samples.empty() ? nullptr : samples.data(), &n,
                                                    lib.last_seen[d]);
      if (r == nvml::kSuccess) {
        samples.resize(std::min<std::size_t>(n, samples.size()));
        break;
      }
      if (r == nvml::kNotFound) {  // no process ran on it since
        samples.clear();
        break;
      }
      if (r == nvml::kNotSupported) {
        sampled = false;
        samples.clear();
        break;
      }
      if (r != nvml::kInsufficientSize || tries + 1 == kMaxTries) lib.fail("nvmlDeviceGetProcessUtilization", d, r);
      samples.resize(n + 8);
    }
    for (const nvml::ProcessUtilizationSample& s : samples) {
      lib.last_seen[d] = std::max(lib.last_seen[d], s.timeStamp);
      auto& [sum, count] = sm[s.pid];
      sum += std::min(s.smUtil, 100u);
      ++count;
      processes[s.pid].pid = static_cast<pid_t>(s.pid);
    }

    // The compute processes and their memory now.
    std::vector<nvml::ProcessInfo> infos;
    for (unsigned tries = 0;; ++tries) {
      unsigned int n = static_cast<unsigned int>(infos.size());
      const nvml::Return r = lib.running_processes(lib.devices[d], &n, infos.empty() ? nullptr : infos.data());
      if (r == nvml::kSuccess) {
        infos.resize(std::min<std::size_t>(n, infos.size()));
        break;
      }
      if (r != nvml::kInsufficientSize || tries + 1 == kMaxTries) lib.fail(lib.running_processes_name, d, r);
      infos.resize(n + 8);
    }
    for (const nvml::ProcessInfo& p : infos) {
      GpuProcessUsage& usage = processes[p.pid];
      usage.pid = static_cast<pid_t>(p.pid);
      if (p.usedGpuMemory != nvml::kValueNotAvailable) usage.memory_mib += p.usedGpuMemory / kMiB;
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

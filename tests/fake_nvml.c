/* A stand-in for libnvidia-ml.so.1 (test_gpu_usage.cpp): two GPUs with canned processes, so GpuUsage's
 * NVML path runs where there is no GPU. Its types follow NVML's ABI as agent/gpu_usage.cpp declares it.
 *   GPU 0: pid 100 sampled at 40 % and 60 % SM, 2 GiB; pid 200 not sampled, 512 MiB; pid 400 sampled at
 *          30 %, no memory. Every call returns samples newer than the timestamp it is given.
 *   GPU 1: no per-process sampling (NVML_ERROR_NOT_SUPPORTED); pid 300, 1 GiB. */
#include <stddef.h>

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} Sample;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} ProcessInfo;

enum { kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kInsufficientSize = 7 };
static const unsigned long long kMiB = 1024ULL * 1024ULL;

int nvmlInit_v2(void) { return kSuccess; }
int nvmlShutdown(void) { return kSuccess; }
const char *nvmlErrorString(int r) { return r == kSuccess ? "Success" : "fake NVML error"; }
int nvmlDeviceGetCount_v2(unsigned int *count) {
  *count = 2;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
  if (index > 1) return kInvalidArgument;
  *device = (void *)(size_t)(index + 1);
  return kSuccess;
}

int nvmlDeviceGetProcessUtilization(void *device, Sample *samples, unsigned int *count, unsigned long long last_seen) {
  if (device != (void *)1) return kNotSupported;
  const Sample canned[3] = {{100, last_seen + 1, 40, 0, 0, 0}, {400, last_seen + 1, 30, 0, 0, 0},
                            {100, last_seen + 2, 60, 0, 0, 0}};
  if (samples == NULL || *count < 3) {
    *count = 3;
    return kInsufficientSize;
  }
  for (unsigned int i = 0; i < 3; ++i) samples[i] = canned[i];
  *count = 3;
  return kSuccess;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, ProcessInfo *infos) {
  const ProcessInfo gpu0[2] = {{100, 2048 * kMiB, 0, 0}, {200, 512 * kMiB, 0, 0}};
  const ProcessInfo gpu1[1] = {{300, 1024 * kMiB, 0, 0}};
  const ProcessInfo *have = device == (void *)1 ? gpu0 : gpu1;
  const unsigned int n = device == (void *)1 ? 2 : 1;
  if (infos == NULL || *count < n) {
    *count = n;
    return kInsufficientSize;
  }
  for (unsigned int i = 0; i < n; ++i) infos[i] = have[i];
  *count = n;
  return kSuccess;
}

#pragma once
// torchrun's --nproc-per-node gpu, cpu and auto, with torchrun's meaning (determine_local_world_size in
// torch/distributed/run.py), per host: `cpu` is the host's CPU count (os.cpu_count(): the CPUs online),
// `gpu` the GPUs CUDA would show the ranks (torch.cuda.device_count(): the NVIDIA driver's GPUs narrowed
// by CUDA_VISIBLE_DEVICES as the ranks get it; none is an error naming the host, where torchrun says
// "Cuda is not available"), `auto` the GPUs where CUDA shows some, else the CPUs. The pure rules: the
// facts come from each host (launcher/start/device_census.hpp) and the ranks' CUDA_VISIBLE_DEVICES from
// hvrun's environment and -x (launcher/ranks/env_policy.hpp).
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/launch_options.hpp"

namespace hvrun {

// What a host has, as the census learns it.
struct HostDevices {
  int cpus = 0;  // sysconf(_SC_NPROCESSORS_ONLN), what Python's os.cpu_count() gives
  // One entry per GPU the NVIDIA driver lists (/proc/driver/nvidia/gpus), its UUID ("GPU-8f6e...") or
  // "" when the driver does not say it; nullopt when there is no NVIDIA driver.
  std::optional<std::vector<std::string>> gpus;
};

// "gpu", "cpu", "auto" (kNone: "N"), as --nproc-per-node takes them.
std::string per_host_count_name(PerHostCount count);

// The GPUs CUDA shows a process of a host with `driver_gpus` (HostDevices::gpus, as listed) under
// CUDA_VISIBLE_DEVICES `visible` (nullopt: unset), as CUDA reads it: a comma list of ordinals (each
// item's leading digits, an optional sign before them; a negative ordinal or an item without digits ends
// the list; one beyond the driver's GPUs ends it there) or of GPU-/MIG- UUIDs (an item of another form
// ends the list; a GPU- UUID, or its leading part, must name one of the driver's GPUs, else the list ends
// there; MIG instances cannot be checked here and count as listed). An item named twice hides every GPU.
int visible_gpus(const std::vector<std::string>& driver_gpus, const std::optional<std::string>& visible);

// The ranks `count` gives `host`: its CPUs, or its visible GPUs (visible_gpus). `gpu` where CUDA would
// show none throws UsageError naming the host, what hides its GPUs and what to give instead.
int ranks_for(PerHostCount count, const std::string& host, const HostDevices& devices,
              const std::optional<std::string>& visible);

// Every host's slots are its count (parallel to o.hosts), -np their sum, and the restarts' floor of
// --nnodes MIN:MAX (o.counted_min_hosts) MIN times the fewest; o.per_host_count is then done with.
void apply_counts(LaunchOptions& o, const std::vector<int>& counts);

}  // namespace hvrun

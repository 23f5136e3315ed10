#pragma once
// torchrun's --nproc-per-node gpu, cpu and auto across the hosts: before the plan is made (the output,
// the ranks' exits and the restarts are sized from it), every host is asked what it has, and each gets
// its own count as its slots (launcher/cli/device_count.hpp has the rules). This machine answers at once;
// every other host answers one short command over an SSH session of its own, all hosts in parallel (at
// most --connect-concurrency at a time), each bounded by --ssh-connect-timeout and the login shell's
// bound (shell_timeout_of). That is one more SSH connection per host than a launch with a number makes,
// and only with these values. A host reached by --rsh-agent or srun, or any host under --dry-run, is
// refused instead: the count needs hvrun's own SSH, and --dry-run contacts no host.
#include <optional>
#include <string>

#include "launcher/cli/device_count.hpp"
#include "launcher/cli/launch_options.hpp"

namespace hvrun {

// Counts every host's devices and sets its slots, -np and the restarts' floor (apply_counts). Does
// nothing when o.per_host_count is kNone, or under --check-only, which starts no rank (the slots stay
// 1). Throws UsageError for what the user can change (a host without GPUs for `gpu`, a host the count
// cannot reach), Error naming the host when it cannot be counted (SSH, its shell, its answer).
void take_device_census(LaunchOptions& o);

// The question to a host: a command for its login shell that runs /bin/sh printing "cpus N", then,
// where the NVIDIA driver is, "driver" and one "gpu UUID" line per GPU ("gpu" alone when the driver's
// information file gives no UUID).
std::string device_census_command();
// Its answer, as HostDevices; throws Error naming `host` when the output is not of that form.
HostDevices parse_device_census(const std::string& host, const std::string& out);

// This machine's, read directly; `nvidia_gpus` is the driver's folder (a test points it elsewhere).
HostDevices local_devices(const std::string& nvidia_gpus = "/proc/driver/nvidia/gpus");

}  // namespace hvrun

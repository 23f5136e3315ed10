#pragma once
// hvrun's exit codes besides a rank's own code (README, "Exit codes"): one definition for the job, its
// teardown, the rank-exit report and the --check-only report.

namespace hvrun {

inline constexpr int kExitOk = 0;
inline constexpr int kExitLaunchFailed = 1;  // an agent, a host or the start-up failed
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCannotExecute = 127;

}  // namespace hvrun

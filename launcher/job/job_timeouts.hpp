#pragma once
// The bounds both drivers share, the fixed job (job.cpp) and the Horovod elastic one (elastic_job.cpp),
// defined once.
#include <chrono>

namespace hvrun {

// -H's names resolved to learn which are this machine, before the event loop.
inline constexpr std::chrono::milliseconds kResolveTimeout{5000};
// After SIGKILL, how long agents get to report their ranks' exits before hvrun stops waiting.
inline constexpr std::chrono::milliseconds kAfterKillSlack{1000};
// How long the agents get to go once told (ShutdownMsg), and a local agent's reaping after the loop.
inline constexpr std::chrono::milliseconds kShutdownTimeout{2000};
// How long a report of a rank's failure (or the hang autopsy's) waits for the rank output before it to
// be written.
inline constexpr std::chrono::milliseconds kReportDrainTimeout{500};
// The hang autopsy: how long agents wait for their ranks' stacks, and how long hvrun waits for the
// agents' answers; the ranks' kill grace starts after it.
inline constexpr std::chrono::milliseconds kStackTimeout{500};
inline constexpr std::chrono::milliseconds kAutopsyTimeout{1000};

}  // namespace hvrun

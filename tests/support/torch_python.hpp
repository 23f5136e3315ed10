#pragma once
// Test support: Debian's Python with python3-torch, which the torch DDP lab cases run their programs
// with (scripts/horovod.sh installs it), and why those cases skip where it is missing.
#include <optional>
#include <string>

// The first line of a torch DDP lab case: skips, saying why, without the lab or without torch. Needs
// Catch2's WARN and tests/support/lab.hpp in the test file.
#define HVRUN_SKIP_WITHOUT_TORCH_LAB()                             \
  HVRUN_SKIP_WITHOUT_LAB();                                        \
  if (auto hvrun_torch_why = ::hvrun::test::torch_unavailable()) { \
    WARN("torch lab tests skipped: " << *hvrun_torch_why);         \
    return;                                                        \
  }

namespace hvrun::test {

inline constexpr const char* kTorchPython = "/usr/bin/python3";

// Why kTorchPython cannot run torch.distributed here, or nothing when it can.
std::optional<std::string> torch_unavailable();

}  // namespace hvrun::test

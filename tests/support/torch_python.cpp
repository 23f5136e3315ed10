#include "tests/support/torch_python.hpp"

#include "tests/support/child_process.hpp"

namespace hvrun::test {

std::optional<std::string> torch_unavailable() {
  using namespace std::chrono_literals;
  if (run({kTorchPython, "-c", "import torch.distributed"}, 120s).exit_code != 0)
    return std::string(kTorchPython) + " cannot import torch (scripts/horovod.sh installs Debian's python3-torch; "
                                       "scripts/test.sh runs it)";
  return std::nullopt;
}

}  // namespace hvrun::test

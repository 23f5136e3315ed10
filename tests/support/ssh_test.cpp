#include "tests/support/ssh_test.hpp"

#include <stdexcept>

namespace hvrun::testing {

SshError connect_error(const SshTarget& target) {
  try {
    SshSession::connect(target);
  } catch (const SshError& e) {
    return e;
  }
  FAIL("connect to " << target.host << " succeeded");
  throw std::logic_error("unreachable");
}

}  // namespace hvrun::testing

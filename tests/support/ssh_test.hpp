#pragma once
// Test support for the SshSession tests (test_ssh_session.cpp, test_ssh_connect.cpp): the skip without
// sshd and the expected connect failure.
#include <catch2/catch.hpp>

#include <string>

#include "launcher/ssh/ssh_session.hpp"
#include "tests/sshd_fixture.hpp"

// Without root or /usr/sbin/sshd a case warns "skipped: ..." (ctest shows it skipped) and returns.
#define SKIP_WITHOUT_SSHD()                                        \
  do {                                                             \
    if (!hvrun::testing::ssh_tests_can_run()) {                    \
      WARN("skipped: needs root and /usr/sbin/sshd");              \
      return;                                                      \
    }                                                              \
  } while (0)

namespace hvrun::testing {

// Connects and expects an SshError; returns it (fails the test when the connect succeeds).
SshError connect_error(const SshTarget& target);

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace hvrun::testing

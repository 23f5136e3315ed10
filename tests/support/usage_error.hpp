#pragma once
// Test support: the message of the UsageError that `f` throws; fails the test when it throws nothing.
#include <catch2/catch.hpp>

#include <string>

#include "common/error.hpp"

namespace hvrun::test {

template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const hvrun::UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError thrown");
  return {};
}

}  // namespace hvrun::test

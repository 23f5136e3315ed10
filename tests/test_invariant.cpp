// HVRUN_INVARIANT: a broken invariant is an InternalError (an hvrun::Error, so the edges report it as one
// line) naming the file, the line and the condition's text; a kept one costs nothing else.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "common/invariant.hpp"
#include "common/user_message.hpp"

using Catch::Contains, Catch::EndsWith;

namespace {

int checked_value(const std::optional<int>& value) {
  HVRUN_INVARIANT(value.has_value());
  return *value;
}

}  // namespace

TEST_CASE("invariant: a kept invariant passes, a broken one names file, line and condition", "[invariant]") {
  CHECK(checked_value(7) == 7);
  try {
    checked_value(std::nullopt);
    FAIL("no InternalError thrown");
  } catch (const hvrun::InternalError& e) {
    CHECK_THAT(e.file(), EndsWith("tests/test_invariant.cpp"));
    CHECK(e.line() == 16);
    CHECK(e.condition() == "value.has_value()");
    CHECK_THAT(std::string(e.what()), Contains("internal error (an hvrun bug) at ") &&
                                          Contains("test_invariant.cpp:16: value.has_value()"));
    // One of the hierarchy: user_message passes it on whole, as it does any hvrun::Error.
    CHECK(hvrun::user_message(e, "testing") == e.what());
  }
}

TEST_CASE("invariant: the message form appends its message, evaluated only when broken", "[invariant]") {
  int evaluated = 0;
  const auto message = [&] {
    ++evaluated;
    return std::string("index 3 of 2");
  };
  HVRUN_INVARIANT_MSG(1 + 1 == 2, message());
  CHECK(evaluated == 0);
  try {
    HVRUN_INVARIANT_MSG(3 < 2, message());
    FAIL("no InternalError thrown");
  } catch (const hvrun::Error& e) {
    CHECK(evaluated == 1);
    CHECK_THAT(std::string(e.what()), EndsWith(": 3 < 2: index 3 of 2"));
    CHECK(dynamic_cast<const hvrun::InternalError*>(&e) != nullptr);
  }
}

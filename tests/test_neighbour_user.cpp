// NeighbourUser (tests/support/neighbour_user.hpp): the second Unix user the shared-cluster lab cases
// play the neighbour with is made, acts as itself, and is gone afterwards. Needs root.
#include <catch2/catch.hpp>
#include <pwd.h>
#include <unistd.h>

#include "tests/support/neighbour_user.hpp"

using namespace hvrun::test;

TEST_CASE("neighbour user: made, runs as itself without the caller's groups, removed with its processes",
          "[integration]") {
  if (::geteuid() != 0) {
    WARN("skipped: making a Unix user needs root");
    return;
  }
  std::string name;
  {
    NeighbourUser user("selftest");
    name = user.name();
    CHECK(name == "hvnb-selftest");
    CHECK(user.uid() != 0);
    REQUIRE(::getpwnam(name.c_str()) != nullptr);
    const ChildResult id = user.run({"id", "-u"});
    CHECK(id.exit_code == 0);
    CHECK(id.out == std::to_string(user.uid()) + "\n");
    const ChildResult groups = user.run({"id", "-G"});
    CHECK(groups.out == std::to_string(user.gid()) + "\n");
    const ChildResult denied = user.run({"sh", "-c", "echo x > /root/hvnb-selftest-denied"});
    CHECK(denied.exit_code != 0);
  }
  CHECK(::getpwnam(name.c_str()) == nullptr);
  CHECK(::access("/root/hvnb-selftest-denied", F_OK) != 0);
}

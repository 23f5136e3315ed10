#include <catch2/catch.hpp>

#include "launcher/start/same_host.hpp"

using hvrun::HostIdentity;
using hvrun::same_host_error;

TEST_CASE("same host under two names: refused naming both entries and the merged entry", "[same_host]") {
  CHECK_FALSE(same_host_error({{"a", 2, "boot1/net:4:100"}, {"b", 1, "boot1/net:4:101"}, {"c", 1, "boot2/net:4:100"}}));
  // Unknown identities never match each other.
  CHECK_FALSE(same_host_error({{"a", 1, ""}, {"b", 1, ""}}));
  const auto e = same_host_error({{"x", 1, "b0/net:4:7"}, {"lab1", 2, "b1/net:4:9"}, {"198.18.0.11", 3, "b1/net:4:9"}});
  REQUIRE(e);
  CHECK(*e == "hosts 'lab1' and '198.18.0.11' are one machine (same kernel and network namespace); list it once "
              "with the slots added: -H lab1:5 (or 'lab1 slots=5' in a hostfile)");
}

// Catch2's main, compiled once so that test files build quickly.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

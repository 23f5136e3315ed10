#pragma once
// Test support: a file's whole content, as the test compares it.
#include <filesystem>
#include <string>

namespace hvrun::test {

// Every byte of `path`, or "" when it cannot be read (the comparison that follows fails and shows it).
std::string slurp(const std::filesystem::path& path);

}  // namespace hvrun::test

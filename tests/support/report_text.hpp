#pragma once
// Test support: measuring report text (its lines, their width, its first screen).
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun::test {

std::vector<std::string> lines_of(const std::string& text);
std::size_t widest(const std::vector<std::string>& lines);
// The first `n` lines, each with its newline.
std::string first_lines(const std::vector<std::string>& lines, std::size_t n);

}  // namespace hvrun::test

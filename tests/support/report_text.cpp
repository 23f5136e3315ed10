#include "tests/support/report_text.hpp"

#include <algorithm>
#include <sstream>

namespace hvrun::test {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::size_t widest(const std::vector<std::string>& lines) {
  std::size_t w = 0;
  for (const auto& l : lines) w = std::max(w, l.size());
  return w;
}

std::string first_lines(const std::vector<std::string>& lines, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < n; ++i) out += lines[i] + "\n";
  return out;
}

}  // namespace hvrun::test

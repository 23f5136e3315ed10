#include "launcher/shell_quote.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace hvrun {

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& w : argv) {
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char c) {
      return std::isalnum(c) || std::string_view("_@%+=:,./-").find(static_cast<char>(c)) != std::string_view::npos;
    });
    if (!line.empty()) line += ' ';
    line += plain ? w : shell_quote(w);
  }
  return line;
}

}  // namespace hvrun

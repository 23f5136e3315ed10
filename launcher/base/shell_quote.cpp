#include "launcher/base/shell_quote.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include <wordexp.h>

#include "common/error.hpp"

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

std::vector<std::string> shell_words(const std::string& text, const std::string& flag) {
  wordexp_t we{};
  const int rc = ::wordexp(text.c_str(), &we, WRDE_NOCMD);
  if (rc != 0) {
    if (rc == WRDE_NOSPACE) ::wordfree(&we);
    throw UsageError(flag + ": '" + text + "' is not " +
                     (rc == WRDE_CMDSUB ? std::string("allowed to hold command substitution")
                                        : std::string("a list of shell words (check the quotes)")));
  }
  std::vector<std::string> words(we.we_wordv, we.we_wordv + we.we_wordc);
  ::wordfree(&we);
  return words;
}

}  // namespace hvrun

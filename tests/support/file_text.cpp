#include "tests/support/file_text.hpp"

#include <fstream>
#include <sstream>

namespace hvrun::test {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace hvrun::test

#include "tests/support/cli_parse.hpp"

#include "common/error.hpp"

namespace hvrun::test {

CliResult parse_cli(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"hvrun"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

std::string cli_error(const std::vector<std::string>& args) {
  try {
    parse_cli(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace hvrun::test

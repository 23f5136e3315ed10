#pragma once
// Test support: hvrun's command line parsed as the binary parses it (parse_command_line), in-process.
#include <string>
#include <vector>

#include "launcher/cli/launch_options.hpp"

namespace hvrun::test {

// `args` as the words after `hvrun`.
CliResult parse_cli(const std::vector<std::string>& args);
// The message of the UsageError that parsing `args` throws, or "accepted".
std::string cli_error(const std::vector<std::string>& args);

}  // namespace hvrun::test

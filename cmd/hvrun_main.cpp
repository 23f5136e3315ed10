// hvrun: launch and supervise a multi-host training job (see README.md). Errors become one line on
// stderr and an exit code here, at the edge; everything below throws.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "agent/error.hpp"
#include "launcher/job.hpp"
#include "launcher/launch_options.hpp"

int main(int argc, char** argv) {
  // hvrun's own messages go to stderr: stdout carries the ranks' output (and, for the agent, the protocol).
  spdlog::set_default_logger(spdlog::stderr_logger_st("hvrun"));
  spdlog::set_pattern("%v");
  spdlog::set_level(spdlog::level::warn);
  try {
    hvrun::CliResult cli = hvrun::parse_command_line(argc, argv);
    if (cli.action == hvrun::CliAction::kExit) return cli.exit_code;
    spdlog::set_level(spdlog::level::from_str(cli.options.verbose ? std::string("info") : cli.options.log_level));
    hvrun::Job job(std::move(cli.options));
    return job.run();
  } catch (const hvrun::UsageError& e) {
    std::cerr << "hvrun: error: " << e.what() << "\n";
    return hvrun::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hvrun: error: " << e.what() << "\n";
    return hvrun::kExitLaunchFailed;
  }
}

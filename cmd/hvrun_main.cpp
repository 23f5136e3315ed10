// hvrun: launch and supervise a multi-host training job (see README.md). Errors become one line on
// stderr and an exit code here, at the edge; everything below throws.
#include <sys/prctl.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <iostream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/user_message.hpp"
#include "common/open_files_limit.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/cli/log_choice.hpp"
#include "launcher/job/elastic_job.hpp"
#include "launcher/job/job.hpp"
#include "launcher/start/device_census.hpp"

namespace {
int run(int argc, char** argv) {
  // hvrun makes the job secret (or reads it from its environment) and holds it to the end: from the
  // start, no core dump and no /proc/PID/{mem,environ,fd} or ptrace for other processes of the user
  // (root only). Its children (ssh, the local agent, ranks under mpirun) get it back with their exec.
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) {
    std::cerr << "hvrun: error: prctl(PR_SET_DUMPABLE, 0): " << std::strerror(errno) << "\n";
    return hvrun::kExitLaunchFailed;
  }
  // hvrun's own messages go to stderr, each "hvrun: " + text (common/log.hpp): stdout carries the
  // ranks' output. Thread-safe: the output writer's thread reports a broken stream too.
  hvrun::init_log(hvrun::kHvrunLogPrefix);
  // A reader of hvrun's stdout that goes away (`hvrun ... | head`) or an SSH socket closed under us
  // must be an error to handle (EPIPE), not a signal that kills hvrun before it stops the ranks.
  ::signal(SIGPIPE, SIG_IGN);
  hvrun::set_log_threshold(hvrun::kDefaultLogLevel, hvrun::all_log_subsystems());
  try {
    hvrun::CliResult cli = hvrun::parse_command_line(argc, argv);
    if (cli.action == hvrun::CliAction::kExit) return cli.exit_code;
    hvrun::set_log_threshold(cli.options.log_level, cli.options.log_subsys);
    // A few descriptors per host: raise the soft limit, before any thread starts (common/open_files_limit.hpp).
    hvrun::raise_open_files_limit();
    // --nproc-per-node gpu|cpu|auto: every host's count is its slots, learnt before the plan is made.
    hvrun::take_device_census(cli.options);
    if (cli.options.elastic) {
      hvrun::ElasticJob job(std::move(cli.options));
      return job.run();
    }
    hvrun::Job job(std::move(cli.options));
    return job.run();
  } catch (const hvrun::UsageError& e) {
    std::cerr << "hvrun: error: " << e.what() << "\n";
    return hvrun::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hvrun: error: " << hvrun::user_message(e, "reading the command line or setting up the job") << "\n";
    return hvrun::kExitLaunchFailed;
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int code = run(argc, argv);
  // Connection threads still inside an SSH connect (a host that never answered) are detached; leave
  // without running static destructors under them. Their sessions close with the process.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(code);
}

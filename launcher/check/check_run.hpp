#pragma once
// The end of a --check-only run: the report assembled from the job's hosts and the probe round, and
// written where the options say (stdout in the chosen form, and --report-file).
#include <chrono>
#include <vector>

#include "launcher/check/check_report.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/nic/probe_round.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

// `round`: null when probing never started. `base`: the job-wide fields (probe time, filter, single
// host); its hosts are filled in here, in the job's order.
CheckReport check_report_of(const std::vector<JobHost>& hosts, const ProbeRound* round, CheckInput base);
// Writes the report (--report-file, then stdout as --json, --matrix, --verbose or the summary) and
// returns hvrun's exit code: the report's, or 1 when the report file cannot be written.
int print_check_report(const CheckReport& report, const LaunchOptions& options);
// Why some host has no usable NIC, and after how many attempts of a probe round with `probe_timeout`
// hvrun gave up: the text of a launch's error line.
std::string unusable_text(const CheckReport& report, std::chrono::milliseconds probe_timeout, int attempts);

}  // namespace hvrun

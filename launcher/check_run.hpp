#pragma once
// The end of a --check-only run: the report assembled from the job's hosts and the probe round, and
// written where the options say (stdout in the chosen form, and --report-file).
#include <chrono>
#include <vector>

#include "launcher/check_report.hpp"
#include "launcher/job_host.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/probe_round.hpp"

namespace hvrun {

// `round`: null when probing never started. `base`: the job-wide fields (probe time, filter, single
// host); its hosts are filled in here, in the job's order.
CheckReport check_report_of(const std::vector<JobHost>& hosts, const ProbeRound* round, CheckInput base);
// Writes the report (--report-file, then stdout as --json, --matrix, --verbose or the summary) and
// returns hvrun's exit code: the report's, or 1 when the report file cannot be written.
int print_check_report(const CheckReport& report, const LaunchOptions& options);

}  // namespace hvrun

#include "launcher/check/check_run.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/base/exit_codes.hpp"
#include "launcher/base/text_layout.hpp"
#include "common/write_fully.hpp"
#include "launcher/check/check_html.hpp"
#include "launcher/nic/probe_retry.hpp"

namespace hvrun {

CheckReport check_report_of(const std::vector<JobHost>& hosts, const ProbeRound* round, CheckInput in) {
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const JobHost& h = hosts[i];
    HostCheck c;
    c.host = h.name;
    c.ssh_error = h.connect_error;
    if (h.hello) {
      c.agent_version = h.hello->version;
      c.interfaces = h.hello->interfaces;
    }
    if (const auto m = round ? round->member_of(i) : std::nullopt; m && *m < round->selections().size())
      c.selection = round->selections()[*m];
    in.hosts.push_back(std::move(c));
  }
  return CheckReport(std::move(in));
}

int print_check_report(const CheckReport& r, const LaunchOptions& options) {
  int exit_code = r.exit_code();
  if (!options.report_file.empty()) {
    try {
      write_report_file(options.report_file, r.html());
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      exit_code = kExitLaunchFailed;
    }
  }
  const std::size_t width = terminal_width(1);
  write_fully(1, options.json      ? r.json() + "\n"
                 : options.matrix  ? r.matrix(::isatty(1) == 1, width)
                 : options.verbose ? r.listing()
                                   : r.summary(width));
  return exit_code;
}

std::string unusable_text(const CheckReport& report, std::chrono::milliseconds probe_timeout, int attempts) {
  std::string why = report.why_unusable();
  while (!why.empty() && why.back() == '\n') why.pop_back();
  return why + "\n" + std::string(kHvrunLogPrefix) + "gave up after " + attempts_text(probe_timeout, attempts);
}

}  // namespace hvrun

#include "launcher/start/connect_progress.hpp"

namespace hvrun {

std::string agent_loss_reason(const JobHost& host, const std::string& error) {
  std::string why = error.empty() ? std::string("it exited") : error;
  if (host.remote) {
    std::string tail = host.remote->stderr_tail();
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    if (!tail.empty()) why += "; its last words: " + tail.substr(tail.rfind('\n') + 1);
  }
  return why;
}

StartProgress start_progress(const std::vector<JobHost>& hosts, std::chrono::milliseconds elapsed) {
  StartProgress p;
  p.hosts = hosts.size();
  for (const JobHost& h : hosts) {
    if (!h.connecting && !h.connect_error) ++p.connected;
    if (h.hello) ++p.agents_up;
    if (!h.connect_error && !(h.hello && h.ready)) p.pending.push_back(h.name);
  }
  p.elapsed = elapsed;
  return p;
}

std::optional<std::string> connect_failures(const std::vector<JobHost>& hosts) {
  std::string report;
  int failed = 0;
  for (const JobHost& h : hosts)
    if (h.connect_error) {
      ++failed;
      report += "\n    " + *h.connect_error;
    }
  if (failed == 0) return std::nullopt;
  return "cannot start the job on " + std::to_string(failed) + " of " + std::to_string(hosts.size()) +
         " hosts:" + report;
}

std::string agents_missing(const std::vector<JobHost>& hosts) {
  std::string missing;
  for (const JobHost& h : hosts)
    if (!h.hello && !h.connect_error) missing += (missing.empty() ? "" : ", ") + h.name;
  return missing;
}

}  // namespace hvrun

#include "launcher/start/connect_progress.hpp"

#include <algorithm>
#include <utility>

#include "common/duration_text.hpp"

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

namespace {

// Its login shell runs: asked to run the agent, and the agent not come yet.
bool in_shell(const JobHost& h) { return h.life.starting() && h.shell_since.has_value(); }

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t, std::chrono::steady_clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - t);
}

}  // namespace

StartProgress start_progress(const std::vector<JobHost>& hosts, std::chrono::milliseconds elapsed,
                             std::chrono::steady_clock::time_point now) {
  StartProgress p;
  p.hosts = hosts.size();
  for (const JobHost& h : hosts) {
    if (!h.life.starting() && !h.life.start_failed()) ++p.connected;
    if (h.hello) ++p.agents_up;
    if (in_shell(h)) {
      p.in_shell.push_back(h.name);
      p.longest_shell = std::max(p.longest_shell, since(*h.shell_since, now));
    } else if (!h.life.start_failed() && !h.life.ready()) {
      p.pending.push_back(h.name);
    }
  }
  p.elapsed = elapsed;
  return p;
}

StartCheck check_start(const std::vector<JobHost>& hosts, std::chrono::steady_clock::time_point now,
                       std::chrono::milliseconds start_timeout) {
  const auto bound = shell_timeout_of(start_timeout);
  std::string stuck;
  std::vector<std::string> shells_out;
  StartCheck check;
  for (const JobHost& h : hosts) {
    if (h.hello || h.life.start_failed()) continue;
    if (!in_shell(h)) {
      stuck += (stuck.empty() ? "" : ", ") + h.name;
      continue;
    }
    const auto ran = since(*h.shell_since, now);
    if (ran >= bound) {
      shells_out.push_back(shell_stuck_text(h.name, ran));
    } else if (check.recheck == std::chrono::milliseconds(0) || bound - ran < check.recheck) {
      check.recheck = bound - ran;
    }
  }
  if (stuck.empty() && shells_out.empty()) return check;
  std::string text;
  if (!stuck.empty())
    text = "agents did not start within " + seconds_text(start_timeout) + " on: " + stuck +
           "; raise --start-timeout or check those hosts";
  if (!shells_out.empty()) {
    if (!text.empty()) text += "\n";
    text += "agents did not start within " + seconds_text(bound) + " (" + std::to_string(kShellTimeoutFactor) +
            " x --start-timeout) of their host's login shell on " + std::to_string(shells_out.size()) +
            (shells_out.size() == 1 ? " host:" : " hosts:");
    for (const auto& line : shells_out) text += "\n    " + line;
  }
  check.give_up = std::move(text);
  return check;
}

std::optional<std::string> shell_times_text(const std::vector<JobHost>& hosts) {
  std::vector<std::pair<std::chrono::milliseconds, std::string>> times;
  for (const JobHost& h : hosts)
    if (h.shell_time) times.emplace_back(*h.shell_time, h.name);
  if (times.empty()) return std::nullopt;
  std::sort(times.begin(), times.end());
  return "login shells (exec request to the agent's first bytes): median " + seconds_text(times[times.size() / 2].first) +
         ", slowest " + times.back().second + " " + seconds_text(times.back().first);
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
    if (!h.hello && !h.life.start_failed()) missing += (missing.empty() ? "" : ", ") + h.name;
  return missing;
}

}  // namespace hvrun

#include "common/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>

#include "hvrun/error.hpp"

namespace hvrun {

namespace {

struct Loggers {
  std::array<std::shared_ptr<spdlog::logger>, kLogSubsystems.size()> subsys;
  std::shared_ptr<spdlog::logger> general;  // spdlog's default logger once init_log made it
  std::shared_ptr<spdlog::logger> report;   // pattern "%v": the text is the whole line
};

// A pattern belongs to a sink (spdlog's formatters live there), so the reports have a sink of their own.
Loggers make_loggers(std::string_view prefix, const std::function<spdlog::sink_ptr()>& new_sink) {
  const spdlog::sink_ptr lines = new_sink();
  lines->set_pattern(std::string(prefix) + "%v");
  const spdlog::sink_ptr reports = new_sink();
  reports->set_pattern("%v");
  auto make = [](std::string name, const spdlog::sink_ptr& sink) {
    auto l = std::make_shared<spdlog::logger>(std::move(name), sink);
    l->set_level(spdlog::level::info);
    return l;
  };
  Loggers l;
  for (const LogSubsysInfo& s : kLogSubsystems)
    l.subsys[static_cast<std::size_t>(s.subsys)] = make("hvrun." + std::string(s.name), lines);
  l.general = make("hvrun", lines);
  l.report = make("hvrun.report", reports);
  return l;
}

std::mutex before_line_mutex;
std::function<void()> before_line;  // set_before_log_line's

// spdlog's stderr sink, which first lets a line drawn in place on the terminal step aside.
class StderrSink : public spdlog::sinks::stderr_sink_mt {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    {
      const std::lock_guard<std::mutex> lock(before_line_mutex);
      if (before_line) before_line();
    }
    spdlog::sinks::stderr_sink_mt::log(msg);
  }
};

// Every stderr sink shares spdlog's console mutex, so lines and reports never interleave.
spdlog::sink_ptr new_stderr_sink() { return std::make_shared<StderrSink>(); }

// Before init_log (unit tests, which log in-process): the launcher's prefix, to stderr.
Loggers& loggers() {
  static Loggers l = make_loggers(kHvrunLogPrefix, new_stderr_sink);
  return l;
}

static_assert(
    [] {
      for (std::size_t i = 0; i < kLogSubsystems.size(); ++i)
        if (static_cast<std::size_t>(kLogSubsystems[i].subsys) != i) return false;
      return true;
    }(),
    "kLogSubsystems is indexed by LogSubsys");

}  // namespace

LogSubsysSet all_log_subsystems() { return LogSubsysSet().set(); }

void set_before_log_line(std::function<void()> hook) {
  const std::lock_guard<std::mutex> lock(before_line_mutex);
  before_line = std::move(hook);
}

std::string log_subsys_names() {
  std::string names;
  for (const LogSubsysInfo& s : kLogSubsystems) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

LogSubsysSet parse_log_subsys(std::string_view list, std::string_view source) {
  const bool except = !list.empty() && list.front() == '^';
  if (except) list.remove_prefix(1);
  auto refuse = [&](const std::string& why) {
    return UsageError(std::string(source) + ": " + why + "; give a comma list of " + log_subsys_names() +
                      ", or all (^LIST: all but those)");
  };
  LogSubsysSet named;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view name = list.substr(start, comma - start);
    start = comma + 1;
    if (name.empty())
      throw refuse(list.empty() ? "no subsystem given" : "an empty name in '" + std::string(list) + "'");
    if (name == "all") {
      named.set();
      continue;
    }
    const auto* it = std::find_if(kLogSubsystems.begin(), kLogSubsystems.end(),
                                  [&](const LogSubsysInfo& s) { return s.name == name; });
    if (it == kLogSubsystems.end()) throw refuse("unknown subsystem '" + std::string(name) + "'");
    named.set(static_cast<std::size_t>(it->subsys));
  }
  return except ? ~named : named;
}

void init_log(std::string_view prefix, const std::function<spdlog::sink_ptr()>& new_sink) {
  loggers() = make_loggers(prefix, new_sink);
  spdlog::set_default_logger(loggers().general);
}

void init_log(std::string_view prefix) { init_log(prefix, new_stderr_sink); }

void set_log_threshold(LogLevel threshold, LogSubsysSet debug_of) {
  Loggers& l = loggers();
  for (std::size_t i = 0; i < l.subsys.size(); ++i)
    l.subsys[i]->set_level(debug_of.test(i) ? threshold : std::max(threshold, spdlog::level::info));
  l.general->set_level(threshold);
  l.report->set_level(threshold);
}

spdlog::logger& log_of(LogSubsys subsys) { return *loggers().subsys.at(static_cast<std::size_t>(subsys)); }

void log_report(LogLevel level, std::string_view text) { loggers().report->log(level, "{}", text); }

}  // namespace hvrun

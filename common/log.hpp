#pragma once
// hvrun's own log lines, for the launcher and the agent alike: spdlog's default logger for the lines of
// no subsystem, and one named logger per subsystem (the table below, declared once, as NCCL declares
// NCCL_DEBUG_SUBSYS's names). All write to stderr with a pattern that holds the program's prefix
// ("hvrun: ", "hvrun-agent: "): callers pass only the text, and a text of several lines keeps its later
// lines as they are.
//
// Selection: a line prints when its level is at or above the threshold; a subsystem's debug and trace
// lines print only while that subsystem is selected (all are unless --hvrun-log-subsys says otherwise);
// info, warn and error lines print whatever the selection. The default logger's lines follow the
// threshold alone.
//
// The library (collectives/) never uses these: it logs through its own "hvrun.collectives" logger
// (collectives/collectives_log.hpp). Only a program's main() calls init_log, which makes hvrun's
// default logger spdlog's; the subsystems' loggers are not in spdlog's registry.
#include <spdlog/logger.h>

#include <array>
#include <bitset>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace hvrun {

// hvrun's levels are spdlog's: trace, debug, info, warn, error, off (critical is not offered).
using LogLevel = spdlog::level::level_enum;

enum class LogSubsys : std::size_t { kSsh, kStart, kNic, kRank, kOutput, kProc, kStore, kRendezvous };

struct LogSubsysInfo {
  LogSubsys subsys;
  std::string_view name;    // as --hvrun-log-subsys takes it
  std::string_view covers;  // for the option's help
};

// Indexed by LogSubsys.
inline constexpr std::array kLogSubsystems{
    LogSubsysInfo{LogSubsys::kSsh, "ssh", "SSH connections, host keys, uploads, libssh's own lines"},
    LogSubsysInfo{LogSubsys::kStart, "start", "starting the agents"},
    LogSubsysInfo{LogSubsys::kNic, "nic", "probing the NICs and choosing one per host"},
    LogSubsysInfo{LogSubsys::kRank, "rank", "the ranks' processes"},
    LogSubsysInfo{LogSubsys::kOutput, "output", "the ranks' output on its way to the terminal and files"},
    LogSubsysInfo{LogSubsys::kProc, "proc", "hvrun's own process: its open files limit"},
    LogSubsysInfo{LogSubsys::kStore, "store", "the job's rendezvous store (in the agent)"},
    LogSubsysInfo{LogSubsys::kRendezvous, "rendezvous", "Horovod's Gloo rendezvous (in the agent)"},
};

using LogSubsysSet = std::bitset<kLogSubsystems.size()>;

// Every subsystem selected.
LogSubsysSet all_log_subsystems();

// "ssh,nic": those; "all": every one; "^ssh,nic": every one but those (NCCL_DEBUG_SUBSYS's rule).
// An empty list or an unknown name throws UsageError naming `source` (the flag) and the valid names.
LogSubsysSet parse_log_subsys(std::string_view list, std::string_view source);

// "ssh, start, nic, ...": the names, for messages and help.
std::string log_subsys_names();

// Makes the loggers write to stderr with the pattern prefix + text, and makes hvrun's default logger
// spdlog's. Threshold info, every subsystem selected, until set_log_threshold. Call it before any other
// thread logs (it replaces the loggers): a program calls it once at its start.
void init_log(std::string_view prefix);
// The same through sinks made by `new_sink` (two: one for log lines, one for log_report), for a test
// that captures what is logged.
void init_log(std::string_view prefix, const std::function<spdlog::sink_ptr()>& new_sink);

// The threshold of every logger, and the subsystems whose debug and trace lines print.
void set_log_threshold(LogLevel threshold, LogSubsysSet debug_of);

// The logger of a subsystem ("hvrun.ssh", ...).
spdlog::logger& log_of(LogSubsys subsys);

// Called before each line or report reaches stderr (a status line drawn in place erases itself), until
// replaced; an empty function removes it. It runs on the logging thread and must not log.
void set_before_log_line(std::function<void()> hook);

// Writes a report worded whole by its maker, prefixes included on each of its lines, at `level`
// (rank_failure_report, timings_text, whose exact words are their contract), through the same sink.
void log_report(LogLevel level, std::string_view text);

// hvrun's (the launcher's) prefix, as its pattern writes it, for those reports.
inline constexpr std::string_view kHvrunLogPrefix = "hvrun: ";

}  // namespace hvrun

#pragma once
// Issue 40: what a running job shows and keeps of itself, for fixed and elastic jobs alike (JobCore
// feeds it): every job event and every observation window as JSON lines in --events FILE (schema: README,
// "--events"), the ranks' ledger (wall, CPU, waiting share, peak RSS) printed as one table per host and
// rank at the end with --verbose or --rank-table, and a live status line while ranks run (on a terminal
// only: ranks alive, CPU, waiting share, the slowest rank).
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/control_message.hpp"
#include "common/unique_fd.hpp"
#include "launcher/job/straggler_watch.hpp"

namespace hvrun {

class StatusLine;

class JobRecord {
 public:
  using Clock = std::chrono::steady_clock;

  // `events_file`: --events' path ("" for none), made as --report's are (common/checked_directory.hpp);
  // `table`: print the ranks' table at the end; `status_fd`: where the live line is drawn when it is a
  // terminal (hvrun: stderr), -1 for nowhere.
  JobRecord(const std::string& events_file, bool table, int status_fd);
  ~JobRecord();
  JobRecord(const JobRecord&) = delete;
  JobRecord& operator=(const JobRecord&) = delete;

  // A job event: `kind` ("job_start", "failure", "restart", "elastic_change", ...) with its fields.
  void event(const std::string& kind, nlohmann::json fields = nlohmann::json::object());

  void rank_started(int rank, const std::string& host, int pid);
  void rank_exited(int rank, const std::string& host, const ExitedMsg& m);
  // A host's part of an observation window.
  void observed(const std::string& host, const ObservationMsg& m);
  void straggler(const StragglerWatch::Event& e);
  // The job's end: its "job_end" event and, when asked for, the table on stderr.
  void ended(int exit_code);

  // Erases the live line; call before anything else is written to the terminal.
  void clear_status();

  // The ranks' table as printed at the end ("" when no rank ran).
  std::string table() const;

 private:
  struct Rank {
    std::string host;
    int pid = 0;
    Clock::time_point started{}, ended{};
    long long cpu_ms = 0;        // observed windows' CPU, replaced by wait4's at the exit
    bool exit_cpu = false;       // cpu_ms is the exit's
    long long window_ms = 0;     // observed time, and the part of it spent waiting on peers
    double waited_ms = 0;
    long long peak_rss_kb = 0;
    double last_busy = 0, last_waiting = 0;  // the latest window's shares
    std::optional<int> exit_code;  // or killed by a signal
    int signal = 0;
  };
  void write(nlohmann::json line);
  void draw_status();

  UniqueFd events_;
  std::string events_path_;
  bool table_;
  std::mutex status_mutex_;  // the line is erased from any thread that logs (set_before_log_line)
  std::unique_ptr<StatusLine> status_;
  Clock::time_point start_ = Clock::now();
  std::map<int, Rank> ranks_;
};

}  // namespace hvrun

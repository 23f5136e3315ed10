#pragma once
// Where rank output goes: each rank's stdout and stderr are cut into lines (LineSplitter) and written
// to hvrun's stdout/stderr behind "[RANK]<stdout>:" / "[RANK]<stderr>:", one write per line so lines
// never interleave; with --output-filename also raw into DIR/rank.N/{stdout,stderr}, with torchrun's
// --log-dir into its layout (rank_logs.hpp), which also chooses whose lines the console shows. The last stderr
// lines of each rank are kept for the failure report. The writes themselves happen on an
// OutputWriter's thread: write() and flush() never block on a slow reader.
#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/checked_directory.hpp"
#include "common/control_message.hpp"
#include "common/unique_fd.hpp"
#include "launcher/output/line_splitter.hpp"
#include "launcher/output/output_writer.hpp"
#include "launcher/output/rank_logs.hpp"
#include "launcher/output/stderr_digest.hpp"

namespace hvrun {

struct OutputOptions {
  std::string directory;         // --output-filename; empty: no files
  bool timestamp = false;        // --prefix-output-with-timestamp
  int stdout_fd = 1;
  int stderr_fd = 2;
  std::size_t keep_stderr_lines = 10;
  // With a directory: each rank's files are made when it starts (open_files), not up front (a Horovod
  // elastic job's workers, numbered up to a bound few jobs reach).
  bool files_on_demand = false;
};

class OutputMux {
 public:
  // Creates DIR/rank.N/ for every rank up front (DIR alone with files_on_demand), so a bad directory
  // fails before anything starts (UsageError naming --output-filename and the path). DIR, when hvrun
  // did not make it, must be the user's (or root's) and writable by no one else; below it nothing is
  // followed through a link, and a file found there is emptied only when it is the user's own
  // (common/checked_directory.hpp).
  // `on_relieved`: see OutputWriter. `logs`: torchrun's --log-dir, --redirects, --tee and the console
  // filters, applied by place().
  OutputMux(int size, OutputOptions options, std::function<void()> on_relieved = {}, RankLogs logs = {});

  // files_on_demand: DIR/rank.N/ for `rank`, before its first output; nothing when there is no DIR or
  // they are made. UsageError as the constructor's.
  void open_files(int rank);
  // torchrun's logs: where `rank` (`local_rank` on `host`) writes in `attempt` (0 first), before its
  // first output; its files from an earlier attempt are closed. UsageError when they cannot be made.
  void place(int rank, int local_rank, const std::string& host, int attempt);
  const std::string& log_run_dir() const { return logs_.run_dir(); }  // "" without log files
  void write(int rank, OutputStream stream, std::string_view bytes);
  // The rank's streams are over (it exited): print partial lines as lines.
  void flush(int rank);
  // --max-restarts: the rank starts again; what its earlier run said of its end is forgotten (its
  // output, already written, stays where it is).
  void restart(int rank) {
    flush(rank);
    ranks_.at(rank).tail.clear();
    ranks_.at(rank).digest = StderrDigest();
  }
  const std::deque<std::string>& last_stderr(int rank) const { return ranks_.at(rank).tail; }
  // What the rank's stderr said of its end: its crash report, its last traceback's exception.
  const StderrDigest& stderr_digest(int rank) const { return ranks_.at(rank).digest; }
  // Output accepted but not yet written; above the high-water mark the launcher holds back the
  // acknowledgements that let agents send more.
  bool congested() const { return writer_.congested(); }
  std::size_t queued_bytes() const { return writer_.queued_bytes(); }
  bool drain(std::chrono::milliseconds timeout) { return writer_.drain(timeout); }
  void notify_when_empty(std::function<void()> done) { writer_.notify_when_empty(std::move(done)); }

 private:
  struct RankOutput {
    LineSplitter out, err;
    UniqueFd out_file, err_file;
    bool console_out = true, console_err = true;
    std::string label;  // the prefix's rank part; "" for the rank's number
    std::deque<std::string> tail;
    StderrDigest digest;
  };
  void emit(int rank, OutputStream stream, std::string_view line);

  OutputOptions options_;
  CheckedDirectory directory_;  // --output-filename's, checked once, each rank's files made from it
  RankLogs logs_;
  std::vector<RankOutput> ranks_;
  std::vector<UniqueFd> retired_;  // earlier attempts' log files, open while the writer may hold their chunks
  OutputWriter writer_;  // last: its thread stops before the files it writes are closed
};

}  // namespace hvrun

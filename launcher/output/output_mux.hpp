#pragma once
// Where rank output goes: each rank's stdout and stderr are cut into lines (LineSplitter) and written
// to hvrun's stdout/stderr behind "[RANK]<stdout>:" / "[RANK]<stderr>:", one write per line so lines
// never interleave; with --output-filename also raw into DIR/rank.N/{stdout,stderr}. The last stderr
// lines of each rank are kept for the failure report. The writes themselves happen on an
// OutputWriter's thread: write() and flush() never block on a slow reader.
#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/control_message.hpp"
#include "common/unique_fd.hpp"
#include "launcher/output/line_splitter.hpp"
#include "launcher/output/output_writer.hpp"
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
  // fails before anything starts (UsageError naming --output-filename and the path).
  // `on_relieved`: see OutputWriter.
  OutputMux(int size, OutputOptions options, std::function<void()> on_relieved = {});

  // files_on_demand: DIR/rank.N/ for `rank`, before its first output; nothing when there is no DIR or
  // they are made. UsageError as the constructor's.
  void open_files(int rank);
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
    std::deque<std::string> tail;
    StderrDigest digest;
  };
  void emit(int rank, OutputStream stream, std::string_view line);

  OutputOptions options_;
  std::vector<RankOutput> ranks_;
  OutputWriter writer_;  // last: its thread stops before the files it writes are closed
};

}  // namespace hvrun

#include "launcher/output/output_mux.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "common/error.hpp"
#include "common/write_fully.hpp"
#include "launcher/base/text_layout.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kTailLineMax = 512;

}  // namespace

OutputMux::OutputMux(int size, OutputOptions options, std::function<void()> on_relieved, RankLogs logs)
    : options_(std::move(options)),
      logs_(std::move(logs)),
      ranks_(size),
      writer_(std::move(on_relieved)) {
  if (options_.directory.empty()) return;
  directory_ = CheckedDirectory::open(options_.directory, 0750, "--output-filename");
  if (options_.files_on_demand) return;
  for (int r = 0; r < size; ++r) open_files(r);
}

void OutputMux::open_files(int rank) {
  RankOutput& r = ranks_.at(rank);
  if (options_.directory.empty() || r.out_file) return;
  const CheckedDirectory dir = directory_.below("rank." + std::to_string(rank), 0750);
  r.out_file = dir.create_file("stdout", 0640, /*exclusive=*/false);  // a new run's files start empty
  r.err_file = dir.create_file("stderr", 0640, /*exclusive=*/false);
}

void OutputMux::place(int rank, int local_rank, const std::string& host, int attempt) {
  RankOutput& r = ranks_.at(rank);
  const RankRoute route = logs_.route(rank, local_rank, host, attempt);
  r.console_out = route.console_out;
  r.console_err = route.console_err;
  r.label = route.label;
  if (logs_.run_dir().empty()) return;
  UniqueFd* files[] = {&r.out_file, &r.err_file};
  const std::string* paths[] = {&route.out_file, &route.err_file};
  for (int i = 0; i < 2; ++i) {
    // Chunks for the earlier attempt's file may still wait in the writer's queue: it stays open.
    if (*files[i]) retired_.push_back(std::move(*files[i]));
    if (paths[i]->empty()) continue;
    // The run's directory is new and each file made once: one found there was put by someone else.
    const std::string relative = paths[i]->substr(logs_.run_dir().size() + 1);
    const auto slash = relative.rfind('/');
    *files[i] = logs_.run_directory().below(relative.substr(0, slash), 0750)
                    .create_file(relative.substr(slash + 1), 0640, /*exclusive=*/true);
  }
}

void OutputMux::write(int rank, OutputStream stream, std::string_view bytes) {
  RankOutput& r = ranks_.at(rank);
  const bool is_out = stream == OutputStream::kStdout;
  if (const UniqueFd& file = is_out ? r.out_file : r.err_file; file) writer_.write(file.get(), std::string(bytes));
  (is_out ? r.out : r.err).feed(bytes, [&](std::string_view line) { emit(rank, stream, line); });
}

void OutputMux::flush(int rank) {
  RankOutput& r = ranks_.at(rank);
  r.out.flush([&](std::string_view line) { emit(rank, OutputStream::kStdout, line); });
  r.err.flush([&](std::string_view line) { emit(rank, OutputStream::kStderr, line); });
}

void OutputMux::emit(int rank, OutputStream stream, std::string_view line) {
  const bool is_out = stream == OutputStream::kStdout;
  if (!is_out) {
    ranks_[rank].digest.line(line);
    auto& tail = ranks_[rank].tail;
    tail.emplace_back(line.substr(0, kTailLineMax));
    while (tail.size() > options_.keep_stderr_lines) tail.pop_front();
  }
  if (!(is_out ? ranks_[rank].console_out : ranks_[rank].console_err)) return;
  std::string text;
  text.reserve(line.size() + 40);
  if (options_.timestamp) text += utc_timestamp();
  text += '[';
  text += ranks_[rank].label.empty() ? std::to_string(rank) : ranks_[rank].label;
  text += is_out ? "]<stdout>:" : "]<stderr>:";
  text += line;
  text += '\n';
  writer_.write(is_out ? options_.stdout_fd : options_.stderr_fd, std::move(text));
}

}  // namespace hvrun

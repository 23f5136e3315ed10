#include "launcher/output/output_mux.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "common/error.hpp"
#include "common/write_fully.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kTailLineMax = 512;

std::string iso_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0750) != 0 && errno != EEXIST)
    throw UsageError("--output-filename: cannot create directory '" + path + "': " + std::strerror(errno));
}

UniqueFd open_output(const std::string& path, const char* flag = "--output-filename", int extra_flags = 0) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, 0640));
  if (!fd) throw UsageError(std::string(flag) + ": cannot create '" + path + "': " + std::strerror(errno));
  return fd;
}

// `path`'s parent directories below `base` (which exists), made one by one.
void make_parents(const std::string& base, const std::string& path) {
  for (auto at = path.find('/', base.size() + 1); at != std::string::npos; at = path.find('/', at + 1)) {
    const std::string dir = path.substr(0, at);
    if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST)
      throw UsageError("--log-dir: cannot create directory '" + dir + "': " + std::strerror(errno));
  }
}

}  // namespace

OutputMux::OutputMux(int size, OutputOptions options, std::function<void()> on_relieved, RankLogs logs)
    : options_(std::move(options)),
      logs_(std::move(logs)),
      ranks_(size),
      writer_(std::move(on_relieved)) {
  if (options_.directory.empty()) return;
  make_dir(options_.directory);
  if (options_.files_on_demand) return;
  for (int r = 0; r < size; ++r) open_files(r);
}

void OutputMux::open_files(int rank) {
  RankOutput& r = ranks_.at(rank);
  if (options_.directory.empty() || r.out_file) return;
  const std::string dir = options_.directory + "/rank." + std::to_string(rank);
  make_dir(dir);
  r.out_file = open_output(dir + "/stdout");
  r.err_file = open_output(dir + "/stderr");
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
    make_parents(logs_.run_dir(), *paths[i]);
    // The run's directory is new (mkdtemp) and each file made once: one found there was put by someone else.
    *files[i] = open_output(*paths[i], "--log-dir", O_EXCL | O_NOFOLLOW);
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
  if (options_.timestamp) text += iso_timestamp();
  text += '[';
  text += ranks_[rank].label.empty() ? std::to_string(rank) : ranks_[rank].label;
  text += is_out ? "]<stdout>:" : "]<stderr>:";
  text += line;
  text += '\n';
  writer_.write(is_out ? options_.stdout_fd : options_.stderr_fd, std::move(text));
}

}  // namespace hvrun

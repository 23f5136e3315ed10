#include "launcher/job/job_record.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <spdlog/spdlog.h>

#include "common/checked_directory.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/write_fully.hpp"
#include "launcher/base/text_layout.hpp"
#include "launcher/output/status_line.hpp"

namespace hvrun {

namespace {

double rounded(double x, double unit) { return std::round(x / unit) * unit; }

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}


double seconds_between(JobRecord::Clock::time_point a, JobRecord::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

JobRecord::JobRecord(const std::string& events_file, bool table, int status_fd)
    : events_path_(events_file), table_(table) {
  // Its directory may be shared (/tmp): made without following a link, an existing file emptied only when
  // it is the user's own (common/checked_directory.hpp).
  if (!events_file.empty()) events_ = CheckedDirectory::create_file_at(events_file, 0644, "--events");
  if (status_fd >= 0 && ::isatty(status_fd) == 1) {
    status_ = std::make_unique<StatusLine>(status_fd);
    set_before_log_line([this] { clear_status(); });
  }
}

JobRecord::~JobRecord() {
  if (status_) set_before_log_line({});
  clear_status();
}

void JobRecord::write(nlohmann::json line) {
  if (!events_) return;
  nlohmann::json out = {{"time", utc_timestamp()}, {"t", rounded(seconds_between(start_, Clock::now()), 0.001)}};
  out.update(line);
  // A local file: each line is one write, so a reader never sees half of one. A full disk loses the
  // record, not the job: one warning, then no more lines.
  if (!write_fully(events_.get(), out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")) {
    spdlog::warn("--events {}: writing failed ({}); no more events are recorded there", events_path_,
                 std::strerror(errno));
    events_.reset();
  }
}

void JobRecord::event(const std::string& kind, nlohmann::json fields) {
  fields["event"] = kind;
  write(std::move(fields));
}

void JobRecord::rank_started(int rank, const std::string& host, int pid) {
  Rank& r = ranks_[rank];
  r = Rank{};
  r.host = host;
  r.pid = pid;
  r.started = Clock::now();
  write({{"event", "rank_start"}, {"rank", rank}, {"host", host}, {"pid", pid}});
}

void JobRecord::rank_exited(int rank, const std::string& host, const ExitedMsg& m) {
  Rank& r = ranks_[rank];
  if (r.host.empty()) r.host = host;
  r.ended = Clock::now();
  if (m.cpu_ms > 0) {
    r.cpu_ms = m.cpu_ms;
    r.exit_cpu = true;
  }
  r.peak_rss_kb = std::max<long long>(r.peak_rss_kb, m.peak_rss_kb);
  r.exit_code = m.exit_code;
  r.signal = m.signal;
  nlohmann::json j = {{"event", "rank_exit"}, {"rank", rank}, {"host", host}, {"exit_code", m.exit_code},
                      {"signal", m.signal}, {"cpu_s", rounded(static_cast<double>(m.cpu_ms) / 1000, 0.001)},
                      {"peak_rss_kb", m.peak_rss_kb}};
  if (!m.cause.empty()) j["cause"] = m.cause;
  if (!m.error.empty()) j["error"] = m.error;
  write(std::move(j));
  draw_status();
}

void JobRecord::observed(const std::string& host, const ObservationMsg& m) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankObservation& o : m.ranks) {
    Rank& r = ranks_[o.rank];
    if (r.host.empty()) r.host = host;
    if (!r.exit_cpu) r.cpu_ms += o.cpu_ms;
    r.window_ms += m.window_ms;
    r.waited_ms += static_cast<double>(m.window_ms) * o.waiting / 1000;
    r.peak_rss_kb = std::max(r.peak_rss_kb, o.rss_kb);
    r.last_busy = o.busy / 1000.0;
    r.last_waiting = o.waiting / 1000.0;
    ranks.push_back({{"rank", o.rank}, {"busy", o.busy / 1000.0}, {"waiting", o.waiting / 1000.0},
                     {"own_data", o.own_data / 1000.0}, {"starved", o.starved / 1000.0},
                     {"cpu_limit", o.cpu_limit / 1000.0}, {"cpu_s", rounded(static_cast<double>(o.cpu_ms) / 1000, 0.001)},
                     {"rss_kb", o.rss_kb}, {"send_rate_mbs", rounded(static_cast<double>(o.send_rate_kbs) / 1000, 0.001)},
                     {"send_peer", o.send_peer},
                     {"fast_rate_mbs", rounded(static_cast<double>(o.fast_rate_kbs) / 1000, 0.001)},
                     {"fast_peer", o.fast_peer},
                     {"gpu_percent", o.gpu_percent >= 0 ? nlohmann::json(o.gpu_percent) : nlohmann::json(nullptr)},
                     {"gpu_mib", o.gpu_mib}});
  }
  write({{"event", "observation"}, {"host", host}, {"window_s", m.window_ms / 1000.0}, {"ranks", std::move(ranks)}});
  draw_status();
}

void JobRecord::straggler(const StragglerWatch::Event& e) {
  const char* cause = "computes";
  if (e.cause == StragglerWatch::Cause::kOwnData) cause = "own_data";
  if (e.cause == StragglerWatch::Cause::kStarved) cause = "starved";
  if (e.cause == StragglerWatch::Cause::kLink) cause = "link";
  // A link's line names a host, no rank: "rank" is null.
  write({{"event", e.recovered ? "straggler_recovered" : "straggler"},
         {"rank", e.rank >= 0 ? nlohmann::json(e.rank) : nlohmann::json(nullptr)}, {"host", e.host}, {"cause", cause},
         {"text", e.text}});
}

void JobRecord::ended(int exit_code) {
  if (status_) set_before_log_line({});
  clear_status();
  {
    const std::lock_guard<std::mutex> lock(status_mutex_);
    status_.reset();
  }
  write({{"event", "job_end"}, {"exit_code", exit_code}});
  if (table_) {
    const std::string t = table();
    if (t.empty()) return;
    std::string report = std::string(kHvrunLogPrefix) + "the ranks at the end (wall, CPU, waiting on peers, peak RSS):\n";
    std::size_t from = 0;
    for (std::size_t nl; (nl = t.find('\n', from)) != std::string::npos; from = nl + 1)
      report += std::string(kHvrunLogPrefix) + t.substr(from, nl + 1 - from);
    report.pop_back();  // log_report ends the last line itself
    log_report(LogLevel::warn, report);
  }
}

void JobRecord::clear_status() {
  const std::lock_guard<std::mutex> lock(status_mutex_);
  if (status_) status_->clear();
}

void JobRecord::draw_status() {
  if (!status_) return;
  int alive = 0;
  double cpu = 0, waiting = 0;
  const Rank* slowest = nullptr;
  int slowest_rank = -1;
  for (const auto& [rank, r] : ranks_) {
    if (r.exit_code) continue;
    ++alive;
    cpu += r.last_busy;
    waiting += r.last_waiting;
    // The rank that waits least is the one the others wait for, in a synchronous job.
    if (!slowest || r.last_waiting < slowest->last_waiting) {
      slowest = &r;
      slowest_rank = rank;
    }
  }
  const std::lock_guard<std::mutex> lock(status_mutex_);
  if (alive == 0) return status_->clear();
  std::string text = std::to_string(alive) + (alive == 1 ? " rank" : " ranks") + " running, busy " + percent_text(cpu / alive) + ", waiting on peers " +
                     percent_text(waiting / alive);
  if (slowest && alive > 1)
    text += "; waits least: rank " + std::to_string(slowest_rank) + " on " + slowest->host + " (" +
            percent_text(slowest->last_waiting) + ")";
  status_->show(text);
}

std::string JobRecord::table() const {
  if (ranks_.empty()) return "";
  std::map<std::string, std::vector<int>> by_host;
  for (const auto& [rank, r] : ranks_) by_host[r.host].push_back(rank);
  std::vector<std::vector<std::string>> rows = {{"host", "rank", "wall", "CPU", "waiting", "peak RSS", "exit"}};
  const auto now = Clock::now();
  for (const auto& [host, ranks] : by_host) {
    for (const int rank : ranks) {
      const Rank& r = ranks_.at(rank);
      const auto end = r.ended != Clock::time_point{} ? r.ended : now;
      const double wall = r.started != Clock::time_point{} ? seconds_between(r.started, end) : 0;
      rows.push_back({host, std::to_string(rank), fixed(wall, 1) + " s", fixed(static_cast<double>(r.cpu_ms) / 1000, 1) + " s",
                      r.window_ms > 0 ? percent_text(r.waited_ms / static_cast<double>(r.window_ms)) : "-",
                      r.peak_rss_kb > 0 ? fixed(static_cast<double>(r.peak_rss_kb) / 1024, 0) + " MiB" : "-",
                      !r.exit_code ? "running" : r.signal ? "signal " + std::to_string(r.signal) : std::to_string(*r.exit_code)});
    }
  }
  std::vector<std::size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < row.size(); ++c) line += " " + pad_right(row[c], widths[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace hvrun

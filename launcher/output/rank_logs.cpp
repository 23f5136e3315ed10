#include "launcher/output/rank_logs.hpp"

#include <charconv>
#include <cstdlib>
#include <vector>

#include "common/error.hpp"

namespace hvrun {

namespace {

std::optional<int> whole(std::string_view text) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0) return std::nullopt;
  return n;
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0;;) {
    const auto comma = text.find(',', at);
    out.push_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

// A directory name safe to make from what users and hosts give: no '/', no "." or "..".
std::string path_word(std::string word) {
  for (char& c : word)
    if (c == '/') c = '_';
  if (word.empty() || word == "." || word == "..") word = "_" + word;
  return word;
}

}  // namespace

StreamSpec StreamSpec::parse(std::string_view text, const std::string& flag) {
  const auto bad = [&] {
    return UsageError(flag + ": '" + std::string(text) + "' is not 0-3 (0: none, 1: stdout, 2: stderr, 3: both) nor "
                      "LOCAL_RANK:0-3,... (e.g. 0:1,1:2)");
  };
  StreamSpec spec;
  if (text.find(':') == std::string_view::npos) {
    const auto v = whole(text);
    if (!v || *v > 3) throw bad();
    spec.all_ = *v;
    return spec;
  }
  spec.all_.reset();
  for (std::string_view item : split_commas(text)) {
    const auto colon = item.find(':');
    const auto rank = whole(item.substr(0, colon));
    const auto v = colon == std::string_view::npos ? std::nullopt : whole(item.substr(colon + 1));
    if (!rank || !v || *v > 3 || !spec.per_rank_.emplace(*rank, *v).second) throw bad();
  }
  return spec;
}

int StreamSpec::of(int local_rank) const {
  if (all_) return *all_;
  const auto it = per_rank_.find(local_rank);
  return it == per_rank_.end() ? 0 : it->second;
}

bool StreamSpec::any() const {
  if (all_) return *all_ != 0;
  for (const auto& [rank, v] : per_rank_)
    if (v != 0) return true;
  return false;
}

std::set<int> parse_rank_list(std::string_view text, const std::string& flag) {
  std::set<int> ranks;
  for (std::string_view item : split_commas(text)) {
    const auto r = whole(item);
    if (!r) throw UsageError(flag + ": '" + std::string(text) + "' is not a comma list of ranks, e.g. 0,1,2");
    ranks.insert(*r);
  }
  return ranks;
}

RankLogs::RankLogs(RankLogOptions options, const std::string& run_id) : options_(std::move(options)) {
  if (options_.dir.empty() && !options_.redirects.any() && !options_.tee.any()) return;
  std::string base = options_.dir;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  // The base (--log-dir, or $TMPDIR) may be shared: checked; the run's directory is new, as mkdtemp's.
  const CheckedDirectory checked = CheckedDirectory::open(base, 0750, "--log-dir");
  run_ = std::make_shared<const CheckedDirectory>(checked.make_unique(path_word(run_id) + "_", 0700));
  run_dir_ = run_->path();
}

RankRoute RankLogs::route(int rank, int local_rank, const std::string& host, int attempt) const {
  RankRoute r;
  const auto& o = options_;
  const bool shown = (o.local_ranks.empty() || o.local_ranks.contains(local_rank)) &&
                     (o.ranks.empty() || o.ranks.contains(rank));
  r.console_out = shown && (!o.redirects.out(local_rank) || o.tee.out(local_rank));
  r.console_err = shown && (!o.redirects.err(local_rank) || o.tee.err(local_rank));
  r.label = std::to_string(rank) + (o.prefix_host ? "@" + host : "");
  if (run_dir_.empty()) return r;
  const std::string dir = run_dir_ + "/attempt_" + std::to_string(attempt) + "/" + path_word(host) + "/" +
                          std::to_string(local_rank);
  // --log-dir alone keeps both streams, as each rank's record; -r/-t name the streams that go to files.
  const bool specs = o.redirects.any() || o.tee.any();
  if (!specs || o.redirects.out(local_rank) || o.tee.out(local_rank)) r.out_file = dir + "/stdout.log";
  if (!specs || o.redirects.err(local_rank) || o.tee.err(local_rank)) r.err_file = dir + "/stderr.log";
  return r;
}

}  // namespace hvrun

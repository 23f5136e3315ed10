#pragma once
// torchrun's log options for every host at once: --log-dir gathers each rank's stdout and stderr on the
// launching machine in torchrun's layout with the host added, so that hosts never collide:
//   DIR/RUN_ID_XXXXXX/attempt_N/HOST/LOCAL_RANK/{stdout,stderr}.log
// (RUN_ID_XXXXXX made new by each hvrun, as torchrun's mkdtemp; N: TORCHELASTIC_RESTART_COUNT).
// --redirects puts a local rank's streams in those files instead of the console, --tee in both; their
// values are torchrun's: 0 none, 1 stdout, 2 stderr, 3 both, for every local rank or per local rank
// ("0:1,1:2"). --local-ranks-filter (torchrun's) and --ranks-filter (hvrun's, global ranks) choose whose
// lines the console shows; the files and the failure reports keep every line. With files asked for and
// no --log-dir, the files go under a new directory in $TMPDIR, as torchrun's.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/checked_directory.hpp"

namespace hvrun {

// torchrun's Std: which of a local rank's streams a spec names.
class StreamSpec {
 public:
  StreamSpec() = default;
  // "0".."3", or "LOCAL:0..3,..." (local ranks not named: 0). UsageError naming `flag` and the value.
  static StreamSpec parse(std::string_view text, const std::string& flag);
  bool out(int local_rank) const { return (of(local_rank) & 1) != 0; }
  bool err(int local_rank) const { return (of(local_rank) & 2) != 0; }
  bool any() const;

 private:
  int of(int local_rank) const;
  std::optional<int> all_ = 0;    // one value for every local rank
  std::map<int, int> per_rank_;   // otherwise
};

// A comma list of ranks ("0,3,5"; torchrun's --local-ranks-filter form), UsageError naming `flag`.
std::set<int> parse_rank_list(std::string_view text, const std::string& flag);

struct RankLogOptions {
  std::string dir;             // --log-dir; empty: none unless a spec asks for files
  StreamSpec redirects, tee;   // -r/--redirects, -t/--tee
  std::set<int> local_ranks;   // --local-ranks-filter; empty: every local rank on the console
  std::set<int> ranks;         // --ranks-filter; empty: every rank on the console
  bool prefix_host = false;    // --prefix-output-with-hostname: "[RANK@HOST]" on the console
};

// Where one rank's output goes in one attempt.
struct RankRoute {
  bool console_out = true, console_err = true;
  std::string out_file, err_file;  // "" when none
  std::string label;               // the console prefix's rank part, "3" or "3@node2"
};

class RankLogs {
 public:
  RankLogs() = default;  // no files, every rank on the console as "[RANK]"
  // Makes the run's directory when files are asked for (UsageError naming --log-dir and strerror, or
  // the base directory when it is another user's or others can write in it: common/checked_directory.hpp).
  RankLogs(RankLogOptions options, const std::string& run_id);
  const std::string& run_dir() const { return run_dir_; }  // "" without files
  const CheckedDirectory& run_directory() const { return *run_; }  // with files: the files are made from it
  RankRoute route(int rank, int local_rank, const std::string& host, int attempt) const;

 private:
  RankLogOptions options_;
  std::string run_dir_;
  std::shared_ptr<const CheckedDirectory> run_;  // shared: RankLogs is copied
};

}  // namespace hvrun

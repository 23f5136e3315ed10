#pragma once
// horovodrun's tuning knobs (horovod/runner/common/util/config_parser.py): set by its flags or its YAML
// --config-file, checked as it checks them, and turned into the HOROVOD_* variables it gives the ranks,
// in its units (--fusion-threshold-mb 64 -> HOROVOD_FUSION_THRESHOLD=67108864).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hvrun {

class HorovodTuning {
 public:
  using Value = std::variant<std::int64_t, double, bool, std::string>;

  // Sets knob `dest` (horovodrun's argparse dest, e.g. "fusion_threshold_mb") from the command line:
  // `text` is parsed as the knob's type (decimal integer, number, or a word); a boolean knob takes
  // "1"/"0". The value then wins over --config-file wherever that flag stands, as in horovodrun.
  // Throws UsageError naming `flag` when the text is not of the knob's type; Error for an unknown dest.
  void set_from_command_line(const std::string& dest, const std::string& text, const std::string& flag);

  // Reads horovodrun's YAML config file (sections params, autotune, timeline, stall_check,
  // library_options, logging, and controller) with yaml-cpp. Knobs set on the command line keep their
  // values. Returns the controller the file names, lower-cased ("gloo" or "mpi"), if any. Throws
  // UsageError naming the file and the key for an unreadable file, bad YAML, a value of the wrong
  // type, or an unknown controller.
  std::optional<std::string> apply_config_file(const std::string& path);

  // horovodrun's checks (validate_config_args): counts and times >= 0, the Gaussian process noise in
  // [0, 1]. Throws UsageError ("--fusion-threshold-mb: -1 must be >= 0").
  void validate() const;

  // The variables horovodrun's set_env_from_args sets, sorted by name: only for knobs that have a value;
  // the autotune variables only when autotuning is on; the timeline ones only with a file name.
  std::vector<std::pair<std::string, std::string>> environment() const;

  // The knob's value, if set (for tests and --dry-run).
  std::optional<Value> get(const std::string& dest) const;

 private:
  void set(const std::string& dest, Value value, bool from_command_line);
  std::map<std::string, Value> values_;
  std::set<std::string> from_command_line_;
};

}  // namespace hvrun

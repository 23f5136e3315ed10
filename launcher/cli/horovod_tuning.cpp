#include "launcher/cli/horovod_tuning.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>

#include <yaml-cpp/yaml.h>

#include "common/error.hpp"
#include "common/invariant.hpp"

namespace hvrun {

namespace {

enum class Kind { kInt, kFloat, kBool, kText, kLevel };
enum class ToEnv { kPlain, kMegabytes, kOneZero, kZeroOne, kOneIfTrue };
enum class Check { kNone, kNonNegative, kUnitInterval };

// One row per knob of config_parser.py: its argparse dest, the flag that sets it, where the YAML file
// keeps it ("" when it cannot), its type, the variable it becomes and how, and its check.
struct Knob {
  const char* dest;
  const char* flag;
  const char* section;
  const char* key;
  Kind kind;
  const char* env;
  ToEnv to_env;
  Check check;
};

constexpr std::array kKnobs{
    Knob{"fusion_threshold_mb", "--fusion-threshold-mb", "params", "fusion_threshold_mb", Kind::kInt,
         "HOROVOD_FUSION_THRESHOLD", ToEnv::kMegabytes, Check::kNonNegative},
    Knob{"cycle_time_ms", "--cycle-time-ms", "params", "cycle_time_ms", Kind::kFloat, "HOROVOD_CYCLE_TIME",
         ToEnv::kPlain, Check::kNonNegative},
    Knob{"cache_capacity", "--cache-capacity", "params", "cache_capacity", Kind::kInt, "HOROVOD_CACHE_CAPACITY",
         ToEnv::kPlain, Check::kNonNegative},
    Knob{"hierarchical_allreduce", "--hierarchical-allreduce", "params", "hierarchical_allreduce", Kind::kBool,
         "HOROVOD_HIERARCHICAL_ALLREDUCE", ToEnv::kOneZero, Check::kNone},
    Knob{"hierarchical_allgather", "--hierarchical-allgather", "params", "hierarchical_allgather", Kind::kBool,
         "HOROVOD_HIERARCHICAL_ALLGATHER", ToEnv::kOneZero, Check::kNone},
    Knob{"torus_allreduce", "--torus-allreduce", "params", "torus_allreduce", Kind::kBool, "HOROVOD_TORUS_ALLREDUCE",
         ToEnv::kOneZero, Check::kNone},
    Knob{"autotune", "--autotune", "autotune", "enabled", Kind::kBool, "HOROVOD_AUTOTUNE", ToEnv::kOneZero,
         Check::kNone},
    Knob{"autotune_log_file", "--autotune-log-file", "autotune", "log_file", Kind::kText, "HOROVOD_AUTOTUNE_LOG",
         ToEnv::kPlain, Check::kNone},
    Knob{"autotune_warmup_samples", "--autotune-warmup-samples", "autotune", "warmup_samples", Kind::kInt,
         "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", ToEnv::kPlain, Check::kNonNegative},
    Knob{"autotune_steps_per_sample", "--autotune-steps-per-sample", "autotune", "steps_per_sample", Kind::kInt,
         "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", ToEnv::kPlain, Check::kNonNegative},
    Knob{"autotune_bayes_opt_max_samples", "--autotune-bayes-opt-max-samples", "autotune", "bayes_opt_max_samples",
         Kind::kInt, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", ToEnv::kPlain, Check::kNonNegative},
    Knob{"autotune_gaussian_process_noise", "--autotune-gaussian-process-noise", "autotune",
         "gaussian_process_noise", Kind::kFloat, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", ToEnv::kPlain,
         Check::kUnitInterval},
    Knob{"timeline_filename", "--timeline-filename", "timeline", "filename", Kind::kText, "HOROVOD_TIMELINE",
         ToEnv::kPlain, Check::kNone},
    Knob{"timeline_mark_cycles", "--timeline-mark-cycles", "timeline", "mark_cycles", Kind::kBool,
         "HOROVOD_TIMELINE_MARK_CYCLES", ToEnv::kOneZero, Check::kNone},
    Knob{"no_stall_check", "--no-stall-check", "stall_check", "", Kind::kBool, "HOROVOD_STALL_CHECK_DISABLE",
         ToEnv::kOneZero, Check::kNone},
    Knob{"stall_check_warning_time_seconds", "--stall-check-warning-time-seconds", "stall_check",
         "warning_time_seconds", Kind::kInt, "HOROVOD_STALL_CHECK_TIME_SECONDS", ToEnv::kPlain, Check::kNonNegative},
    Knob{"stall_check_shutdown_time_seconds", "--stall-check-shutdown-time-seconds", "stall_check",
         "shutdown_time_seconds", Kind::kInt, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", ToEnv::kPlain,
         Check::kNonNegative},
    Knob{"mpi_threads_disable", "--mpi-threads-disable", "library_options", "mpi_threads_disable", Kind::kBool,
         "HOROVOD_MPI_THREADS_DISABLE", ToEnv::kOneZero, Check::kNone},
    Knob{"num_nccl_streams", "--num-nccl-streams", "library_options", "num_nccl_streams", Kind::kInt,
         "HOROVOD_NUM_NCCL_STREAMS", ToEnv::kPlain, Check::kNonNegative},
    Knob{"tcp_flag", "--tcp", "", "", Kind::kBool, "NCCL_IB_DISABLE", ToEnv::kOneIfTrue, Check::kNone},
    Knob{"thread_affinity", "--thread-affinity", "library_options", "thread_affinity", Kind::kInt,
         "HOROVOD_THREAD_AFFINITY", ToEnv::kPlain, Check::kNonNegative},
    Knob{"gloo_timeout_seconds", "--gloo-timeout-seconds", "library_options", "gloo_timeout_seconds", Kind::kInt,
         "HOROVOD_GLOO_TIMEOUT_SECONDS", ToEnv::kPlain, Check::kNonNegative},
    Knob{"log_level", "--log-level", "logging", "level", Kind::kLevel, "HOROVOD_LOG_LEVEL", ToEnv::kPlain,
         Check::kNone},
    Knob{"log_with_timestamp", "--log-with-timestamp", "logging", "with_timestamp", Kind::kBool,
         "HOROVOD_LOG_HIDE_TIME", ToEnv::kZeroOne, Check::kNone},
};

constexpr std::array<std::string_view, 6> kLogLevels{"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"};

const Knob& knob(std::string_view dest) {
  for (const Knob& k : kKnobs)
    if (dest == k.dest) return k;
  throw Error("HorovodTuning: no knob '" + std::string(dest) + "'");
}

std::optional<std::int64_t> to_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> to_double(std::string_view text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// horovodrun's log levels are upper case; any case is accepted here.
std::optional<std::string> to_level(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  if (std::find(kLogLevels.begin(), kLogLevels.end(), text) == kLogLevels.end()) return std::nullopt;
  return text;
}

// Python's str() of a float: the shortest text that reads back, with ".0" on whole numbers and an
// exponent outside [1e-4, 1e16).
std::string python_float(double v) {
  char buf[64];
  const double mag = std::fabs(v);
  const bool fixed = v == 0 || (mag >= 1e-4 && mag < 1e16) || !std::isfinite(v);
  const auto format = fixed ? std::chars_format::fixed : std::chars_format::scientific;
  const auto res = std::to_chars(buf, buf + sizeof buf, v, format);
  std::string s(buf, res.ptr);
  if (fixed && std::isfinite(v) && s.find('.') == std::string::npos) s += ".0";
  return s;
}

double number(const HorovodTuning::Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

std::string text_of(const HorovodTuning::Value& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return python_float(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  return std::get<std::string>(v);
}

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::kInt: return "an integer";
    case Kind::kFloat: return "a number";
    case Kind::kBool: return "true or false";
    case Kind::kLevel: return "one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL (any case)";
    case Kind::kText: break;
  }
  return "a string";
}

// A YAML scalar as the knob's type; nullopt when it is not of that type. A whole number stays an integer
// for a float knob, as Python's YAML loader keeps it (cycle_time_ms: 5 gives HOROVOD_CYCLE_TIME=5).
std::optional<HorovodTuning::Value> from_yaml(const Knob& k, const YAML::Node& node) {
  if (!node.IsScalar()) return std::nullopt;
  const std::string text = node.Scalar();
  bool b = false;
  switch (k.kind) {
    case Kind::kInt:
      if (auto v = to_int(text)) return *v;
      return std::nullopt;
    case Kind::kFloat:
      if (auto v = to_int(text)) return *v;
      if (auto v = to_double(text)) return *v;
      return std::nullopt;
    case Kind::kBool:
      if (YAML::convert<bool>::decode(node, b)) return b;
      return std::nullopt;
    case Kind::kLevel:
      if (auto v = to_level(text)) return *v;
      return std::nullopt;
    case Kind::kText:
      return text;
  }
  return std::nullopt;
}

}  // namespace

void HorovodTuning::set(const std::string& dest, Value value, bool from_command_line) {
  values_[dest] = std::move(value);
  if (from_command_line) from_command_line_.insert(dest);
}

void HorovodTuning::set_from_command_line(const std::string& dest, const std::string& text, const std::string& flag) {
  const Knob& k = knob(dest);
  std::optional<Value> value;
  switch (k.kind) {
    case Kind::kInt:
      if (auto v = to_int(text)) value = *v;
      break;
    case Kind::kFloat:
      if (auto v = to_double(text)) value = *v;
      break;
    case Kind::kBool:
      if (text == "1" || text == "0") value = text == "1";
      break;
    case Kind::kLevel:
      if (auto v = to_level(text)) value = *v;
      break;
    case Kind::kText:
      value = text;
      break;
  }
  if (!value) throw UsageError(flag + ": '" + text + "' is not " + kind_name(k.kind));
  set(dest, std::move(*value), true);
}

std::optional<std::string> HorovodTuning::apply_config_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError("--config-file " + path + ": cannot be read (give the path of horovodrun's YAML config file)");
  } catch (const YAML::Exception& e) {
    throw UsageError("--config-file " + path + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return std::nullopt;
  if (!root.IsMap())
    throw UsageError("--config-file " + path + ": expected a mapping of sections (params:, autotune:, ...)");
  auto section = [&](const char* name) -> YAML::Node {
    const YAML::Node s = root[name];
    if (!s || s.IsNull()) return {};
    if (!s.IsMap()) throw UsageError("--config-file " + path + ": '" + name + "' must be a mapping");
    return s;
  };
  // horovodrun skips a section that is empty (Python's `if params:`).
  auto present = [](const YAML::Node& s) { return s && s.IsMap() && s.size() > 0; };
  auto take = [&](const Knob& k, const YAML::Node& node) {
    if (from_command_line_.count(k.dest) || !node || node.IsNull()) return;
    auto value = from_yaml(k, node);
    if (!value) {
      throw UsageError("--config-file " + path + ": " + k.section + "." + (*k.key ? k.key : "enabled") + " is not " +
                       kind_name(k.kind));
    }
    set(k.dest, std::move(*value), false);
  };
  for (const char* name : {"params", "autotune", "timeline", "stall_check", "library_options", "logging"}) {
    const YAML::Node s = section(name);
    if (!present(s)) continue;
    for (const Knob& k : kKnobs) {
      if (std::string_view(k.section) != name || *k.key == '\0') continue;
      // An autotune section switches autotuning on only with `enabled: true` (its default is off).
      if (std::string_view(k.dest) == "autotune" && !from_command_line_.count(k.dest) && !s[k.key]) {
        set(k.dest, false, false);
        continue;
      }
      take(k, s[k.key]);
    }
    // stall_check.enabled is the inverse of --no-stall-check; a stall_check section without it means on.
    if (std::string_view(name) == "stall_check" && !from_command_line_.count("no_stall_check")) {
      bool enabled = true;
      const YAML::Node e = s["enabled"];
      if (e && !e.IsNull() && !YAML::convert<bool>::decode(e, enabled))
        throw UsageError("--config-file " + path + ": stall_check.enabled is not true or false");
      set("no_stall_check", !enabled, false);
    }
  }
  const YAML::Node controller = root["controller"];
  if (!controller || controller.IsNull()) return std::nullopt;
  if (!controller.IsScalar()) throw UsageError("--config-file " + path + ": controller must be gloo or mpi");
  std::string c = controller.Scalar();
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return c;
}

void HorovodTuning::validate() const {
  for (const auto& [dest, value] : values_) {
    const Knob& k = knob(dest);
    if (k.check == Check::kNone) continue;
    const double v = number(value);
    // The variable holds bytes: keep fusion_threshold_mb * 2^20 inside int64.
    if (dest == "fusion_threshold_mb" && v > static_cast<double>(INT64_MAX / (1024 * 1024)))
      throw UsageError(std::string(k.flag) + ": " + text_of(value) + " MB is too large");
    const bool ok = k.check == Check::kNonNegative ? !(v < 0) : !(v < 0 || v > 1);
    if (!ok) {
      throw UsageError(std::string(k.flag) + ": " + text_of(value) + " must be " +
                       (k.check == Check::kNonNegative ? ">= 0" : "in [0, 1]") +
                       (from_command_line_.count(dest) ? "" : " (from --config-file)"));
    }
  }
}

std::vector<std::pair<std::string, std::string>> HorovodTuning::environment() const {
  const auto autotune = get("autotune");
  const auto timeline = get("timeline_filename");
  // set() stores each knob as its Kind: a bool for kBool, text for kText.
  HVRUN_INVARIANT(!autotune || std::holds_alternative<bool>(*autotune));
  HVRUN_INVARIANT(!timeline || std::holds_alternative<std::string>(*timeline));
  const bool autotuning = autotune && std::get<bool>(*autotune);
  const bool timeline_on = timeline && !std::get<std::string>(*timeline).empty();
  std::vector<std::pair<std::string, std::string>> env;
  for (const Knob& k : kKnobs) {
    const auto it = values_.find(k.dest);
    if (it == values_.end()) continue;
    const std::string_view dest = k.dest;
    if (dest.starts_with("autotune") && !autotuning) continue;
    if (dest.starts_with("timeline") && !timeline_on) continue;
    const Value& v = it->second;
    switch (k.to_env) {
      case ToEnv::kPlain:
        env.emplace_back(k.env, text_of(v));
        break;
      case ToEnv::kMegabytes:
        env.emplace_back(k.env, std::to_string(std::get<std::int64_t>(v) * 1024 * 1024));
        break;
      case ToEnv::kOneZero:
        env.emplace_back(k.env, std::get<bool>(v) ? "1" : "0");
        break;
      case ToEnv::kZeroOne:
        env.emplace_back(k.env, std::get<bool>(v) ? "0" : "1");
        break;
      case ToEnv::kOneIfTrue:
        if (std::get<bool>(v)) env.emplace_back(k.env, "1");
        break;
    }
  }
  std::sort(env.begin(), env.end());
  return env;
}

std::optional<HorovodTuning::Value> HorovodTuning::get(const std::string& dest) const {
  const auto it = values_.find(dest);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hvrun

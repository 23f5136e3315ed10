#include "launcher/cli/horovodrun_flags.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "hvrun/version.hpp"
#include "common/program_path.hpp"
#include "launcher/cli/help_formatter.hpp"

namespace hvrun {

namespace {

namespace g = help_group;

// Knobs that take a value: (flag, dest, type name for --help, help group, help). Their defaults are
// Horovod's own (v0.28.1): hvrun sets the variable only when the knob is given.
struct ValueKnob {
  const char* flag;
  const char* dest;
  const char* type;
  const char* group;
  const char* help;
};
constexpr std::array kValueKnobs{
    ValueKnob{"--fusion-threshold-mb", "fusion_threshold_mb", "MB", g::kTuning,
              "Fusion buffer: HOROVOD_FUSION_THRESHOLD, in bytes (Horovod: 128)"},
    ValueKnob{"--cycle-time-ms", "cycle_time_ms", "MS", g::kTuning,
              "Delay between fusion cycles: HOROVOD_CYCLE_TIME (Horovod: 1)"},
    ValueKnob{"--cache-capacity", "cache_capacity", "N", g::kTuning,
              "Tensor names cached: HOROVOD_CACHE_CAPACITY (Horovod: 1024)"},
    ValueKnob{"--autotune-log-file", "autotune_log_file", "FILE", g::kAutotune,
              "CSV of the trials: HOROVOD_AUTOTUNE_LOG (with --autotune)"},
    ValueKnob{"--autotune-warmup-samples", "autotune_warmup_samples", "N", g::kAutotune,
              "HOROVOD_AUTOTUNE_WARMUP_SAMPLES (Horovod: 3)"},
    ValueKnob{"--autotune-steps-per-sample", "autotune_steps_per_sample", "N", g::kAutotune,
              "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE (Horovod: 10)"},
    ValueKnob{"--autotune-bayes-opt-max-samples", "autotune_bayes_opt_max_samples", "N", g::kAutotune,
              "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES (Horovod: 20)"},
    ValueKnob{"--autotune-gaussian-process-noise", "autotune_gaussian_process_noise", "X", g::kAutotune,
              "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE in [0, 1] (Horovod: 0.8)"},
    ValueKnob{"--timeline-filename", "timeline_filename", "FILE", g::kAutotune,
              "Record Horovod's events as a JSON timeline: HOROVOD_TIMELINE"},
    ValueKnob{"--stall-check-warning-time-seconds", "stall_check_warning_time_seconds", "SECONDS", g::kAutotune,
              "Warn of stalls: HOROVOD_STALL_CHECK_TIME_SECONDS (Horovod: 60)"},
    ValueKnob{"--stall-check-shutdown-time-seconds", "stall_check_shutdown_time_seconds", "SECONDS", g::kAutotune,
              "Stop on stalls: HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (Horovod: 0)"},
    ValueKnob{"--num-nccl-streams", "num_nccl_streams", "N", g::kTuning,
              "NCCL streams: HOROVOD_NUM_NCCL_STREAMS (Horovod: 1)"},
    ValueKnob{"--thread-affinity", "thread_affinity", "N", g::kTuning,
              "CPU of Horovod's background thread: HOROVOD_THREAD_AFFINITY"},
    ValueKnob{"--gloo-timeout-seconds", "gloo_timeout_seconds", "SECONDS", g::kTuning,
              "Gloo operation timeout: HOROVOD_GLOO_TIMEOUT_SECONDS (Horovod: 30)"},
    ValueKnob{"--log-level", "log_level", "LEVEL", g::kAutotune,
              "HOROVOD_LOG_LEVEL: TRACE, DEBUG, INFO, WARNING, ERROR, FATAL, any case (Horovod: "
              "WARNING); hvrun's own: --hvrun-log-level"},
};

// Boolean knobs in pairs that exclude each other: (flag, dest, value it sets, help group, help).
struct FlagKnob {
  const char* flag;
  const char* dest;
  bool value;
  const char* group;
  const char* help;  // "" hides it, as horovodrun hides it
};
constexpr std::array kFlagPairs{
    std::array{FlagKnob{"--hierarchical-allreduce", "hierarchical_allreduce", true, g::kTuning,
                        "HOROVOD_HIERARCHICAL_ALLREDUCE=1: within hosts, then across"},
               FlagKnob{"--no-hierarchical-allreduce", "hierarchical_allreduce", false, g::kTuning,
                        "HOROVOD_HIERARCHICAL_ALLREDUCE=0, which autotuning keeps"}},
    std::array{FlagKnob{"--hierarchical-allgather", "hierarchical_allgather", true, g::kTuning,
                        "HOROVOD_HIERARCHICAL_ALLGATHER=1: within hosts, then across"},
               FlagKnob{"--no-hierarchical-allgather", "hierarchical_allgather", false, g::kTuning,
                        "HOROVOD_HIERARCHICAL_ALLGATHER=0, which autotuning keeps"}},
    std::array{FlagKnob{"--torus-allreduce", "torus_allreduce", true, g::kTuning,
                        "HOROVOD_TORUS_ALLREDUCE=1: NCCL's 2D torus allreduce"},
               FlagKnob{"--no-torus-allreduce", "torus_allreduce", false, g::kTuning,
                        "HOROVOD_TORUS_ALLREDUCE=0, which autotuning keeps"}},
    std::array{FlagKnob{"--autotune", "autotune", true, g::kAutotune,
                        "HOROVOD_AUTOTUNE=1: tune the knobs not given (see --autotune-*)"},
               FlagKnob{"--no-autotune", "autotune", false, "", ""}},
    std::array{FlagKnob{"--timeline-mark-cycles", "timeline_mark_cycles", true, g::kAutotune,
                        "HOROVOD_TIMELINE_MARK_CYCLES=1 (with --timeline-filename)"},
               FlagKnob{"--no-timeline-mark-cycles", "timeline_mark_cycles", false, "", ""}},
    std::array{FlagKnob{"--no-stall-check", "no_stall_check", true, g::kAutotune,
                        "HOROVOD_STALL_CHECK_DISABLE=1: no stall warnings"},
               FlagKnob{"--stall-check", "no_stall_check", false, "", ""}},
    std::array{FlagKnob{"--mpi-threads-disable", "mpi_threads_disable", true, g::kTuning,
                        "HOROVOD_MPI_THREADS_DISABLE=1: MPI without threads (with --mpi)"},
               FlagKnob{"--no-mpi-threads-disable", "mpi_threads_disable", false, "", ""}},
    std::array{FlagKnob{"--log-with-timestamp", "log_with_timestamp", true, "", ""},
               FlagKnob{"--log-without-timestamp", "log_with_timestamp", false, g::kAutotune,
                        "HOROVOD_LOG_HIDE_TIME=1: Horovod's log lines without the time"}},
    // horovodrun's deprecated spellings of the pair above.
    std::array{FlagKnob{"--no-log-hide-timestamp", "log_with_timestamp", true, "", ""},
               FlagKnob{"--log-hide-timestamp", "log_with_timestamp", false, "", ""}},
};

// Horovod elastic's options (horovodrun's names, value count, type name for --help, help).
struct ElasticFlag {
  const char* names;
  int values;
  const char* type;
  const char* help;
};
constexpr std::array kElastic{
    ElasticFlag{"--min-np,--min-num-proc", 1, "N",
                "Horovod elastic: the fewest ranks to run with (default: -np); with --max-restarts: the fewest "
                "a restart may go on with"},
    ElasticFlag{"--max-np,--max-num-proc", 1, "N", "Horovod elastic: the most ranks to scale up to (default: no bound)"},
    ElasticFlag{"--slots-per-host", 1, "N", "Horovod elastic: slots of a discovered host whose line gives none"},
    ElasticFlag{"--elastic-timeout", 1, "SECONDS", "Horovod elastic: how long to wait for --min-np slots (default 600)"},
    ElasticFlag{"--reset-limit", 1, "N", "Horovod elastic: the most resets before the job fails (default: none)"},
    ElasticFlag{"--blacklist-cooldown-range", 2, "MIN MAX",
                "Horovod elastic: seconds a failing host stays out, doubling per failure (default: for good)"},
    ElasticFlag{"--host-discovery-script", 1, "SCRIPT",
                "Horovod elastic: a program printing HOST:SLOTS lines, run every second; enables elastic mode"},
};

// A whole number of at least `least` for `flag`, or UsageError.
int whole_number(const std::string& text, const std::string& flag, int least, const char* what) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < least)
    throw UsageError(flag + ": '" + text + "' is not a whole number of " + what + ", " + std::to_string(least) +
                     " or more");
  return n;
}

}  // namespace

void add_horovodrun_options(CLI::App& app, HorovodrunFlags& f) {
  for (const ValueKnob& k : kValueKnobs) {
    app.add_option_function<std::string>(
           k.flag, [&f, k](const std::string& v) { f.knobs.emplace_back(k.dest, v, k.flag); }, k.help)
        ->type_name(k.type)
        ->group(k.group);
  }
  for (const auto& pair : kFlagPairs) {
    CLI::Option* opts[2];
    for (int i = 0; i < 2; ++i) {
      const FlagKnob k = pair[i];
      opts[i] = app.add_flag_callback(
                       k.flag, [&f, k] { f.knobs.emplace_back(k.dest, k.value ? "1" : "0", k.flag); }, k.help)
                    ->group(k.group);
    }
    opts[0]->excludes(opts[1]);
  }
  app.add_flag_callback("--tcp", [&f] { f.knobs.emplace_back("tcp_flag", "1", "--tcp"); },
                        "NCCL_IB_DISABLE=1: TCP sockets, no InfiniBand")
      ->group(g::kTuning);
  app.add_option("--config-file", f.config_file,
                 "horovodrun's YAML of knobs and controller; command-line flags win")
      ->type_name("FILE")
      ->group(g::kTuning);
  auto* gloo = app.add_flag("--gloo", f.gloo, "Horovod's Gloo controller, rendezvous served by hvrun (default)")
                   ->group(g::kMpirun);
  auto* mpi = app.add_flag("--mpi", f.mpi, "Run Open MPI's mpirun with the NICs hvrun chose (see README)")
                  ->group(g::kMpirun);
  auto* jsrun = app.add_flag("--jsrun", f.jsrun, "Refused: hvrun does not launch through jsrun")->group(g::kMpirun);
  gloo->excludes(mpi)->excludes(jsrun);
  mpi->excludes(jsrun);
  app.add_option("--mpi-args", f.mpi_args,
                 "Extra words for mpirun, with --mpi (shell syntax, e.g. --mpi-args=\"--map-by ppr:2:node\")")
      ->type_name("ARGS")
      ->group(g::kMpirun);
  app.add_option("--binding-args", f.binding_args,
                 "With --mpi: instead of mpirun's \"--bind-to none --map-by slot\"")
      ->type_name("ARGS")
      ->group(g::kMpirun);
  app.add_flag("--check-build", f.check_build, "Show what this hvrun supports, then exit")->group(g::kAbout);
  app.add_flag("--disable-cache", f.disable_cache,
               "Probe the NICs on every launch instead of reusing what a launch on the same hosts, NICs and flags "
               "chose within the last 60 minutes (horovodrun's; HVRUN_DISABLE_CACHE=1 does the same)")
      ->group(g::kNetwork);
  for (const ElasticFlag& r : kElastic) {
    app.add_option(r.names, r.help)->expected(r.values)->type_size(1)->type_name(r.type)->group(g::kElastic);
  }
}

// Fills o.elastic (or o.min_np, with --max-restarts) from horovodrun's elastic flags.
static void settle_elastic_options(const CLI::App& app, LaunchOptions& o) {
  const auto given = [&app](const char* flag) { return app.get_option(flag)->count() > 0; };
  const auto value = [&app](const char* flag) { return app.get_option(flag)->as<std::string>(); };
  const bool script = given("--host-discovery-script");
  const bool min_np = given("--min-np");
  // --min-np with --max-restarts is torchrun's restart mode's floor; alone, or with a discovery script,
  // it asks for Horovod elastic, as in horovodrun (launch.py _is_elastic).
  if (min_np && o.max_restarts > 0 && !script) {
    o.min_np = whole_number(value("--min-np"), "--min-np", 1, "ranks");
    for (const char* other : {"--max-np", "--slots-per-host", "--elastic-timeout", "--reset-limit", "--blacklist-cooldown-range"})
      if (given(other))
        throw UsageError(std::string(other) + " is Horovod elastic's, and --max-restarts asks for restarts of every "
                         "rank (torchrun's); choose one mode (README \"Elastic jobs\")");
    return;
  }
  if (!script && !min_np) {
    for (const char* other : {"--max-np", "--slots-per-host", "--elastic-timeout", "--reset-limit", "--blacklist-cooldown-range"})
      if (given(other))
        throw UsageError(std::string(other) + " applies to a Horovod elastic job; add --host-discovery-script "
                         "(or --min-np with -H's hosts fixed)");
    return;
  }
  if (o.max_restarts > 0)
    throw UsageError("--max-restarts restarts every rank (torchrun's) and --host-discovery-script asks for Horovod "
                     "elastic, whose workers stay up; choose one mode (README \"Elastic jobs\")");
  LaunchOptions::Elastic e;
  if (min_np) e.min_np = whole_number(value("--min-np"), "--min-np", 1, "ranks");
  if (given("--max-np")) e.max_np = whole_number(value("--max-np"), "--max-np", 1, "ranks");
  if (given("--slots-per-host")) e.slots_per_host = whole_number(value("--slots-per-host"), "--slots-per-host", 1, "slots");
  if (script) e.discovery_script = value("--host-discovery-script");
  if (given("--elastic-timeout"))
    e.timeout = std::chrono::seconds(whole_number(value("--elastic-timeout"), "--elastic-timeout", 1, "seconds"));
  if (given("--reset-limit")) e.reset_limit = whole_number(value("--reset-limit"), "--reset-limit", 0, "resets");
  if (given("--blacklist-cooldown-range")) {
    const auto range = app.get_option("--blacklist-cooldown-range")->as<std::vector<std::string>>();
    const int lo = whole_number(range.at(0), "--blacklist-cooldown-range", 1, "seconds");
    const int hi = whole_number(range.at(1), "--blacklist-cooldown-range", 1, "seconds");
    if (hi < lo)
      throw UsageError("--blacklist-cooldown-range " + range[0] + " " + range[1] + ": the maximum is below the minimum");
    e.cooldown = std::pair{lo, hi};
  }
  o.elastic = e;
}

void settle_horovodrun_options(const CLI::App& app, const HorovodrunFlags& f, LaunchOptions& o) {
  settle_elastic_options(app, o);
  if (f.jsrun) {
    throw UsageError("--jsrun: hvrun does not launch through LSF's jsrun; use -H or --hostfile with the job's hosts "
                     "(and --mpi to run Open MPI's mpirun)");
  }
  HorovodTuning tuning;
  for (const auto& [dest, value, flag] : f.knobs) tuning.set_from_command_line(dest, value, flag);
  o.mpi = f.mpi;
  const char* no_cache = std::getenv("HVRUN_DISABLE_CACHE");
  o.disable_cache = f.disable_cache || (no_cache != nullptr && *no_cache != '\0' && std::string_view(no_cache) != "0");
  if (!f.config_file.empty()) {
    const auto controller = tuning.apply_config_file(f.config_file);
    if (controller && !f.gloo && !f.mpi) {
      if (*controller != "gloo" && *controller != "mpi")
        throw UsageError("--config-file " + f.config_file + ": controller '" + *controller + "' is not gloo or mpi");
      o.mpi = *controller == "mpi";
    }
  }
  tuning.validate();
  o.horovod_env = tuning.environment();
  o.mpi_args = f.mpi_args;
  o.binding_args = f.binding_args;
}

std::string check_build_text() {
  const auto mpirun = find_program("mpirun");
  std::string out = std::string("hvrun ") + kVersion + " (launcher; the frameworks and tensor operations are those of "
                    "the Horovod the ranks import):\n\n";
  out += "Available Controllers:\n";
  out += "    [X] Gloo    default: hvrun serves Horovod's Gloo rendezvous\n";
  out += std::string("    [") + (mpirun ? "X" : " ") + "] MPI     --mpi: " +
         (mpirun ? "runs " + *mpirun + " with the NICs hvrun chose"
                 : "needs Open MPI's mpirun on PATH (apt-get install openmpi-bin)") + "\n";
  out += "    [ ] jsrun   not supported: give the hosts with -H or --hostfile\n\n";
  out += "Launcher features:\n";
  out += "    [X] NIC choice per host by identity-checked probes (--check-only shows it)\n";
  out += "    [X] horovodrun's tuning flags and --config-file\n";
  out += "    [X] Elastic training (--min-np, --max-np, --host-discovery-script, ...): Horovod elastic\n";
  return out;
}

}  // namespace hvrun

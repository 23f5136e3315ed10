#include "launcher/cli/horovodrun_flags.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include <CLI/CLI.hpp>

#include "agent/wire/error.hpp"
#include "hvrun/version.hpp"
#include "launcher/base/program_path.hpp"

namespace hvrun {

namespace {

// Knobs that take a value: (flag, dest, type name for --help).
struct ValueKnob {
  const char* flag;
  const char* dest;
  const char* type;
  const char* help;
};
constexpr std::array kValueKnobs{
    ValueKnob{"--fusion-threshold-mb", "fusion_threshold_mb", "MB", "HOROVOD_FUSION_THRESHOLD (in bytes)"},
    ValueKnob{"--cycle-time-ms", "cycle_time_ms", "MS", "HOROVOD_CYCLE_TIME"},
    ValueKnob{"--cache-capacity", "cache_capacity", "N", "HOROVOD_CACHE_CAPACITY"},
    ValueKnob{"--autotune-log-file", "autotune_log_file", "FILE", "HOROVOD_AUTOTUNE_LOG (with --autotune)"},
    ValueKnob{"--autotune-warmup-samples", "autotune_warmup_samples", "N", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES"},
    ValueKnob{"--autotune-steps-per-sample", "autotune_steps_per_sample", "N", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"},
    ValueKnob{"--autotune-bayes-opt-max-samples", "autotune_bayes_opt_max_samples", "N",
              "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"},
    ValueKnob{"--autotune-gaussian-process-noise", "autotune_gaussian_process_noise", "X",
              "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"},
    ValueKnob{"--timeline-filename", "timeline_filename", "FILE", "HOROVOD_TIMELINE"},
    ValueKnob{"--stall-check-warning-time-seconds", "stall_check_warning_time_seconds", "SECONDS",
              "HOROVOD_STALL_CHECK_TIME_SECONDS"},
    ValueKnob{"--stall-check-shutdown-time-seconds", "stall_check_shutdown_time_seconds", "SECONDS",
              "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"},
    ValueKnob{"--num-nccl-streams", "num_nccl_streams", "N", "HOROVOD_NUM_NCCL_STREAMS"},
    ValueKnob{"--thread-affinity", "thread_affinity", "N", "HOROVOD_THREAD_AFFINITY"},
    ValueKnob{"--gloo-timeout-seconds", "gloo_timeout_seconds", "SECONDS", "HOROVOD_GLOO_TIMEOUT_SECONDS"},
    ValueKnob{"--log-level", "log_level", "LEVEL",
              "HOROVOD_LOG_LEVEL: TRACE, DEBUG, INFO, WARNING, ERROR, FATAL (any case); "
              "hvrun's own: --hvrun-log-level"},
};

// Boolean knobs in pairs that exclude each other: (flag, dest, value it sets).
struct FlagKnob {
  const char* flag;
  const char* dest;
  bool value;
  const char* help;  // "" hides it, as horovodrun hides it
};
constexpr std::array kFlagPairs{
    std::array{FlagKnob{"--hierarchical-allreduce", "hierarchical_allreduce", true, "HOROVOD_HIERARCHICAL_ALLREDUCE=1"},
               FlagKnob{"--no-hierarchical-allreduce", "hierarchical_allreduce", false,
                        "HOROVOD_HIERARCHICAL_ALLREDUCE=0"}},
    std::array{FlagKnob{"--hierarchical-allgather", "hierarchical_allgather", true, "HOROVOD_HIERARCHICAL_ALLGATHER=1"},
               FlagKnob{"--no-hierarchical-allgather", "hierarchical_allgather", false,
                        "HOROVOD_HIERARCHICAL_ALLGATHER=0"}},
    std::array{FlagKnob{"--torus-allreduce", "torus_allreduce", true, "HOROVOD_TORUS_ALLREDUCE=1"},
               FlagKnob{"--no-torus-allreduce", "torus_allreduce", false, "HOROVOD_TORUS_ALLREDUCE=0"}},
    std::array{FlagKnob{"--autotune", "autotune", true, "HOROVOD_AUTOTUNE=1 (and the --autotune-* values)"},
               FlagKnob{"--no-autotune", "autotune", false, ""}},
    std::array{FlagKnob{"--timeline-mark-cycles", "timeline_mark_cycles", true, "HOROVOD_TIMELINE_MARK_CYCLES=1"},
               FlagKnob{"--no-timeline-mark-cycles", "timeline_mark_cycles", false, ""}},
    std::array{FlagKnob{"--no-stall-check", "no_stall_check", true, "HOROVOD_STALL_CHECK_DISABLE=1"},
               FlagKnob{"--stall-check", "no_stall_check", false, ""}},
    std::array{FlagKnob{"--mpi-threads-disable", "mpi_threads_disable", true, "HOROVOD_MPI_THREADS_DISABLE=1"},
               FlagKnob{"--no-mpi-threads-disable", "mpi_threads_disable", false, ""}},
    std::array{FlagKnob{"--log-with-timestamp", "log_with_timestamp", true, ""},
               FlagKnob{"--log-without-timestamp", "log_with_timestamp", false, "HOROVOD_LOG_HIDE_TIME=1"}},
    // horovodrun's deprecated spellings of the pair above.
    std::array{FlagKnob{"--no-log-hide-timestamp", "log_with_timestamp", true, ""},
               FlagKnob{"--log-hide-timestamp", "log_with_timestamp", false, ""}},
};

// What hvrun refuses: elastic training and jsrun. (flag names, number of values, what to do instead)
struct Refused {
  const char* names;
  int values;
};
constexpr std::array kElastic{
    Refused{"--min-np,--min-num-proc", 1},       Refused{"--max-np,--max-num-proc", 1},
    Refused{"--slots-per-host", 1},              Refused{"--elastic-timeout", 1},
    Refused{"--reset-limit", 1},                 Refused{"--blacklist-cooldown-range", 2},
    Refused{"--host-discovery-script", 1},
};
constexpr const char* kElasticAdvice =
    ": elastic training (--min-np, --max-np, --host-discovery-script, ...) is not supported by hvrun; run a "
    "fixed-size job (-np N -H host:slots,...), or use horovodrun for an elastic one";

}  // namespace

void add_horovodrun_options(CLI::App& app, HorovodrunFlags& f) {
  const std::string group = "horovodrun's options";
  for (const ValueKnob& k : kValueKnobs) {
    app.add_option_function<std::string>(
           k.flag, [&f, k](const std::string& v) { f.knobs.emplace_back(k.dest, v, k.flag); }, k.help)
        ->type_name(k.type)
        ->group(group);
  }
  for (const auto& pair : kFlagPairs) {
    CLI::Option* opts[2];
    for (int i = 0; i < 2; ++i) {
      const FlagKnob k = pair[i];
      opts[i] = app.add_flag_callback(
                       k.flag, [&f, k] { f.knobs.emplace_back(k.dest, k.value ? "1" : "0", k.flag); }, k.help)
                    ->group(*k.help ? group : std::string());
    }
    opts[0]->excludes(opts[1]);
  }
  app.add_flag_callback("--tcp", [&f] { f.knobs.emplace_back("tcp_flag", "1", "--tcp"); }, "NCCL_IB_DISABLE=1")
      ->group(group);
  app.add_option("--config-file", f.config_file,
                 "horovodrun's YAML file of knobs and controller; flags given on the command line win")
      ->type_name("FILE")
      ->group(group);
  auto* gloo = app.add_flag("--gloo", f.gloo, "Horovod's Gloo controller (the default)")->group(group);
  auto* mpi =
      app.add_flag("--mpi", f.mpi, "Run Open MPI's mpirun with the NICs hvrun chose (see README)")->group(group);
  auto* jsrun = app.add_flag("--jsrun", f.jsrun, "Refused: hvrun does not launch through jsrun")->group(group);
  gloo->excludes(mpi)->excludes(jsrun);
  mpi->excludes(jsrun);
  app.add_option("--mpi-args", f.mpi_args,
                 "Extra words for mpirun, with --mpi (shell syntax, e.g. --mpi-args=\"--map-by ppr:2:node\")")
      ->type_name("ARGS")
      ->group(group);
  app.add_option("--binding-args", f.binding_args, "With --mpi: replaces mpirun's \"--bind-to none --map-by slot\"")
      ->type_name("ARGS")
      ->group(group);
  app.add_flag("--check-build", f.check_build, "Show what this hvrun supports, then exit")->group(group);
  app.add_flag("--disable-cache", f.disable_cache, "Accepted; hvrun keeps no cache (it probes on every launch)")
      ->group(group);
  for (const Refused& r : kElastic) {
    app.add_option(r.names, "Refused: elastic training is not supported")
        ->expected(r.values)
        ->type_size(1)
        ->group(std::string());
  }
}

void settle_horovodrun_options(const CLI::App& app, const HorovodrunFlags& f, LaunchOptions& o) {
  for (const Refused& r : kElastic) {
    const std::string first(std::string_view(r.names).substr(0, std::string_view(r.names).find(',')));
    if (app.get_option(first)->count() > 0) {
      std::string names = r.names;
      std::replace(names.begin(), names.end(), ',', '/');
      throw UsageError(names + kElasticAdvice);
    }
  }
  if (f.jsrun) {
    throw UsageError("--jsrun: hvrun does not launch through LSF's jsrun; use -H or --hostfile with the job's hosts "
                     "(and --mpi to run Open MPI's mpirun)");
  }
  HorovodTuning tuning;
  for (const auto& [dest, value, flag] : f.knobs) tuning.set_from_command_line(dest, value, flag);
  o.mpi = f.mpi;
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
  out += "    [ ] Elastic training (--min-np, --max-np, --host-discovery-script, ...)\n";
  return out;
}

}  // namespace hvrun

#include "launcher/cli/launch_options.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "hvrun/version.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/cli/cli_bindings.hpp"
#include "launcher/cli/help_formatter.hpp"
#include "launcher/cli/horovodrun_flags.hpp"
#include "launcher/cli/log_choice.hpp"
#include "launcher/cli/option_spelling.hpp"
#include "launcher/cli/slurm_allocation.hpp"
#include "launcher/cli/torchrun_flags.hpp"
#include "launcher/nic/nic_filter.hpp"

namespace hvrun {

namespace {

constexpr double kMaxSeconds = 1e9;  // keeps the millisecond count far inside int64

// Validators that also canonicalise: CLI11 converts integers with strtoll(base 0), which would read
// `-np 010` as 8 and accept `0x10`; these accept plain decimal only and hand CLI11 the canonical text.
CLI::Validator int_in_range(int lo, int hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](std::string& input) -> std::string {
        int value = 0;
        const auto* end = input.data() + input.size();
        const auto [ptr, ec] = std::from_chars(input.data(), end, value);
        if (input.empty() || ec != std::errc() || ptr != end || value < lo || value > hi) {
          return "'" + input + "' is not " + what;
        }
        input = std::to_string(value);
        return {};
      },
      "");
}

// Seconds as a decimal number, fractions allowed; `allow_zero` selects >= 0 over > 0.
CLI::Validator seconds(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& input) -> std::string {
        double value = 0;
        const auto* end = input.data() + input.size();
        const auto [ptr, ec] = std::from_chars(input.data(), end, value);
        const bool ok = !input.empty() && ec == std::errc() && ptr == end && std::isfinite(value) &&
                        (allow_zero ? value >= 0 : value > 0) && value <= kMaxSeconds;
        if (!ok) {
          return "'" + input + "' is not a number of seconds " + (allow_zero ? ">= 0" : "> 0") +
                 " (at most 1e9)";
        }
        char buf[64];
        const auto res = std::to_chars(buf, buf + sizeof buf, value);
        input.assign(buf, res.ptr);
        return {};
      },
      "");
}

bool is_env_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (const char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

const CLI::Validator kEnvAssignment(
    [](std::string& input) -> std::string {
      const auto name = std::string_view(input).substr(0, input.find('='));
      if (!is_env_name(name)) {
        return "'" + input + "': '" + std::string(name) +
               "' is not a variable name (letters, digits and _, not starting with a digit)";
      }
      return {};
    },
    "");

// -i: a file that exists and is not a directory (libssh would skip anything else without a word).
const CLI::Validator kIdentityFile(
    [](std::string& input) -> std::string {
      struct stat st{};
      if (::stat(input.c_str(), &st) != 0) {
        return "'" + input + "': " + std::strerror(errno) +
               " (give the path of a private key, e.g. -i ~/.ssh/id_ed25519)";
      }
      if (S_ISDIR(st.st_mode)) return "'" + input + "' is a directory (give the path of a private key file)";
      return {};
    },
    "");

std::chrono::milliseconds to_millis(double secs) {
  return std::chrono::ceil<std::chrono::milliseconds>(std::chrono::duration<double>(secs));
}

// CLI11 names an option by its first long name ("--ssh-port: ..."); users may have typed the short one.
std::string label_of(const CLI::Option& opt) {
  if (opt.get_name() == "--num-proc") return "-np/--num-proc";
  std::string names = opt.get_name(false, true);
  std::replace(names.begin(), names.end(), ',', '/');
  return names;
}

// One readable line from a CLI11 parse error.
std::string describe(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  for (const CLI::Option* opt : app.get_options()) {
    const std::string prefix = opt->get_name() + ": ";
    if (!opt->get_name().empty() && msg.starts_with(prefix)) {
      std::string rest = msg.substr(prefix.size());
      if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && rest.ends_with(" missing")) {
        rest = "needs a value";
      } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
        rest = "given more than once";
      }
      return label_of(*opt) + ": " + rest;
    }
  }
  return msg;
}

// `-x VAR` → (VAR, nullopt): pass the launcher's value; `-x VAR=` → (VAR, ""): set it empty.
std::pair<std::string, std::optional<std::string>> split_env(const std::string& item) {
  const auto eq = item.find('=');
  if (eq == std::string::npos) return {item, std::nullopt};
  return {item.substr(0, eq), item.substr(eq + 1)};
}

}  // namespace

void define_options(CLI::App& app, CliBindings& b) {
  namespace g = help_group;
  app.name("hvrun");
  app.description("Launches a training command as N ranks over hosts reached by SSH.");
  app.prefix_command();  // the first positional starts the command; its own flags stay its own
  app.footer("Everything from the command on goes to each rank unchanged, e.g.\n"
             "  hvrun -np 8 -H a:4,b:4 python train.py --lr 3\n"
             "Use -- before a command that starts with '-'.");
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_help_ptr()->description("Print this help, then exit")->group(g::kAbout);
  app.set_version_flag("-v,--version", std::string("hvrun ") + kVersion)
      ->description("Print hvrun's version, then exit")
      ->group(g::kAbout);

  LaunchOptions& o = b.o;
  app.add_option("-n,--num-proc", b.np, "Number of ranks (default: all slots)")
      ->transform(int_in_range(1, std::numeric_limits<int>::max(), "a positive integer"))
      ->type_name("N")
      ->group(g::kHosts);
  b.hosts_opt = app.add_option("-H,--hosts,--host", b.host_lists,
                               "Hosts host[:slots],..., repeatable (default: Slurm's or localhost)")
                        ->allow_extra_args(false)
                        ->type_name("LIST")
                        ->group(g::kHosts);
  b.hostfile_opt = app.add_option("--hostfile", b.hostfile, "File with one 'host slots=N' per line, instead of -H")
                       ->type_name("FILE")
                       ->group(g::kHosts);
  b.hosts_opt->excludes(b.hostfile_opt);
  app.add_flag("--no-oversubscribe", o.no_oversubscribe, "Fail when -np exceeds the slots (default: warn and run)")
      ->group(g::kHosts)
      ->excludes(app.add_flag("--oversubscribe", o.oversubscribe, "Allow -np above the slots without a warning")
                     ->group(g::kHosts));
  app.add_flag("--allow-run-as-root", o.allow_run_as_root, "Accepted (mpirun's); passed on to mpirun with --mpi")
      ->group(g::kMpirun);
  app.add_flag("--tag-output")
      ->description("Accepted (mpirun's): hvrun always tags lines with [rank]")
      ->group(g::kMpirun);
  b.port_opt = app.add_option("-p,--ssh-port", b.ssh_port, "SSH port of every host (default: ~/.ssh/config's, else 22)")
                   ->transform(int_in_range(1, 65535, "a port (1-65535)"))
                   ->type_name("PORT")
                   ->group(g::kSsh);
  b.identity_opt = app.add_option("-i,--ssh-identity-file", o.ssh_identity_file,
                                  "SSH private key, tried before ~/.ssh/config's and the default keys")
                       ->check(kIdentityFile)
                       ->type_name("FILE")
                       ->group(g::kSsh);
  b.connect_timeout_opt = app.add_option("--ssh-connect-timeout", b.ssh_connect_timeout,
                                         "Seconds to resolve, connect, handshake per host (default: 10)")
                              ->transform(seconds(false))
                              ->type_name("SECONDS")
                              ->group(g::kSsh);
  app.add_option("--connect-concurrency", o.connect_concurrency,
                 "Hosts whose agents start at once: SSH, rsh, srun (default: 64)")
      ->check(CLI::Range(1, 100'000))
      ->type_name("N")
      ->group(g::kSsh);
  b.strict_opt = app.add_flag("--ssh-strict-host-key-checking", o.ssh_strict_host_key,
                              "Refuse unknown host keys whatever the ssh config says "
                              "(default: its StrictHostKeyChecking, else accept-new)")
                     ->group(g::kSsh);
  app.add_option("--agent-path", o.agent_path,
                 "hvrun-agent on remote hosts (default: hvrun's path, PATH, a copy)")
      ->type_name("PATH")
      ->group(g::kSsh);
  b.rsh_opt = app.add_option("--rsh-agent", o.rsh_agent,
                             "Start remote agents as `CMD HOST /bin/sh`, e.g. 'docker exec -i'")
                  ->type_name("CMD")
                  ->group(g::kSsh);
  app.add_option("--launcher", b.launcher,
                 "How remote agents start: ssh, slurm (srun), rsh or auto (default: auto: rsh with --rsh-agent, "
                 "else slurm when the hosts are the Slurm allocation's, else ssh)")
      ->check(CLI::IsMember({"auto", "ssh", "slurm", "rsh"}))
      ->type_name("WAY")
      ->group(g::kSsh);
  // No delimiter: a leading '^' or '=' belongs to its whole comma list (NCCL_SOCKET_IFNAME's rule), so
  // each occurrence stays one value and NicFilter splits it.
  app.add_option("--network-interface,--network-interfaces", o.network_interfaces,
                 "NICs to consider: prefixes, =exact, ^exclude, CIDR subnets (comma lists, repeatable; "
                 "default: every NIC, chosen per host by probes)")
      ->allow_extra_args(false)
      ->type_name("LIST")
      ->group(g::kNetwork);
  app.add_option("--start-timeout", b.start_timeout,
                 "Seconds to connect, probe and start (default: $HOROVOD_START_TIMEOUT, else 30; hosts that "
                 "wait for --connect-concurrency: from the last one's turn)")
      ->transform(seconds(false))
      ->type_name("SECONDS")
      ->group(g::kSupervision);
  app.add_option("--kill-grace", b.kill_grace, "Seconds between SIGTERM and SIGKILL at teardown (default: 3)")
      ->transform(seconds(true))
      ->type_name("SECONDS")
      ->group(g::kSupervision);
  app.add_option("--heartbeat-timeout", b.heartbeat_timeout,
                 "Seconds of silence that cut a host off (default: 20)")
      ->transform(seconds(false))
      ->type_name("SECONDS")
      ->group(g::kSupervision);
  app.add_option("--stall-timeout", b.stall_timeout,
                 "Seconds without rank output or CPU use after which hvrun prints every rank's stack and "
                 "ends the job (default: off)")
      ->transform(seconds(false))
      ->type_name("SECONDS")
      ->group(g::kSupervision);
  app.add_option("--max-restarts,--max_restarts", o.max_restarts,
                 "Restart every rank, up to N times in all, after a rank fails or a host is lost (torchrun's; "
                 "with --min-np, go on with fewer ranks; default: 0)")
      ->transform(int_in_range(0, 1'000'000, "a whole number of restarts, 0 or more"))
      ->type_name("N")
      ->group(g::kSupervision);
  app.add_option("-x,--env", b.env, "Pass VAR (hvrun's value) or set VAR=VALUE for ranks; repeatable")
      ->check(kEnvAssignment)
      ->allow_extra_args(false)
      ->type_name("VAR[=VALUE]")
      ->group(g::kHosts);
  app.add_option("--sync", o.sync_dirs,
                 "Make DIR the same on every host before the ranks start: only files that differ are sent, "
                 "over SFTP; repeatable")
      ->allow_extra_args(false)
      ->type_name("DIR")
      ->group(g::kHosts);
  app.add_option("--sync-limit", o.sync_limit, "Most bytes --sync may list, e.g. 512M, 4G (default: 1G)")
      ->transform(CLI::AsSizeValue(false))
      ->type_name("SIZE")
      ->group(g::kHosts);
  app.add_option("--output-filename", o.output_filename,
                 "Also write rank output to DIR/rank.N/stdout, stderr (default: no)")
      ->type_name("DIR")
      ->group(g::kOutput);
  app.add_flag("--prefix-output-with-timestamp", o.prefix_timestamp, "Prefix output lines with the time (UTC)")
      ->group(g::kOutput);
  app.add_flag("--prefix-output-with-hostname", o.logs.prefix_host, "Prefix output lines with [RANK@HOST]")
      ->group(g::kOutput);
  app.add_option("--ranks-filter", b.ranks_filter,
                 "Show only these ranks' lines on the console, e.g. 0,8 (files and failure reports keep all)")
      ->type_name("LIST")
      ->group(g::kOutput);
  app.add_flag("--verbose", o.verbose, "Log the launch's decisions (--hvrun-log-level info)")->group(g::kOutput);
  b.level_opt = app.add_option("--hvrun-log-level", b.log_level, "hvrun's own logging threshold (default: warn)")
                        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
                        ->type_name("LEVEL")
                        ->group(g::kOutput);
  b.subsys_opt = app.add_option("--hvrun-log-subsys", b.log_subsys,
                                "Subsystems whose debug lines print: " + log_subsys_names() +
                                    "; ^LIST: all but those (default: all)")
                     ->type_name("LIST")
                     ->group(g::kOutput);
  app.add_option("--events", o.events_file,
                 "Write every job event and the ranks' observations to FILE as JSON lines (README: --events)")
      ->type_name("FILE")
      ->group(g::kOutput);
  app.add_flag("--no-straggler-watch", o.no_straggler_watch,
               "Do not observe the ranks while they run: no line naming a rank or link that holds the job back, no "
               "observations in --events")
      ->group(g::kOutput);
  app.add_flag("--rank-table", o.rank_table,
               "At the end, one line per host and rank: wall, CPU, waiting on peers, peak RSS (also with --verbose)")
      ->group(g::kOutput);
  app.add_flag("--dry-run", o.dry_run, "Print the plan and the rank environment; start nothing")->group(g::kChecks);
  app.add_flag("--check-only", o.check_only, "Connect, probe and pick NICs, then report; no command needed")
      ->group(g::kChecks);
  app.add_flag("--json", o.json, "With --check-only: print the report as JSON")->group(g::kChecks);
  app.add_flag("--matrix", o.matrix, "With --check-only: who reaches whom, one character per host pair")
      ->group(g::kChecks);
  app.add_option("--report", o.report_file, "With --check-only: also write the report as one HTML page to FILE")
      ->type_name("FILE")
      ->group(g::kChecks);
  app.add_option("--probe-timeout", b.probe_timeout, "Seconds one NIC probe may take (default: 1)")
      ->transform(seconds(false))
      ->type_name("SECONDS")
      ->group(g::kNetwork);
  app.add_option("--probe-peers", o.probe_peers,
                 "Peers that probe each NIC, 0: all (default: 4; --check-only: all)")
      ->check(CLI::Range(0, 1'000'000))
      ->type_name("K")
      ->group(g::kNetwork);
  app.add_flag_callback("--no-link-test", [options = &o] { options->link_test = false; },
                        "Do not measure each chosen NIC's link to its ring neighbour before the ranks start "
                        "(4 MiB or 250 ms per pair)")
      ->group(g::kNetwork);

  add_horovodrun_options(app, b.horovodrun);
  add_torchrun_options(app, b.torchrun);
}

namespace {

// Horovod elastic's numbers and hosts, checked as horovodrun's launch.py takes them (-np is the
// ranks to start with and --min-np's default), and what hvrun cannot combine with it.
void settle_elastic_job(LaunchOptions& o, bool hosts_given) {
  LaunchOptions::Elastic& e = *o.elastic;
  if (e.min_np == 0) e.min_np = o.np;
  if (e.min_np == 0) throw UsageError("a Horovod elastic job needs -np N or --min-np N: the ranks to start with");
  if (o.np == 0) o.np = e.min_np;
  if (o.np < e.min_np)
    throw UsageError("-np " + std::to_string(o.np) + " is below --min-np " + std::to_string(e.min_np) +
                     "; -np is the ranks to start with, at least --min-np");
  if (e.max_np && *e.max_np < o.np)
    throw UsageError("--max-np " + std::to_string(*e.max_np) + " is below -np " + std::to_string(o.np) +
                     "; give --max-np at least " + std::to_string(o.np));
  if (!e.discovery_script.empty() && hosts_given)
    throw UsageError("--host-discovery-script lists the hosts of an elastic job, so -H/--hostfile cannot; drop one");
  if (e.discovery_script.empty() && o.hosts.size() < 2)
    throw UsageError("--min-np without --host-discovery-script makes -H's hosts a fixed elastic pool, which needs "
                     "at least 2 hosts (as horovodrun); give more hosts, a discovery script, or --max-restarts");
  if (o.mpi) throw UsageError("--mpi: Horovod elastic runs with Gloo only (as horovodrun); drop --mpi");
  if (o.check_only || o.dry_run)
    throw UsageError(std::string(o.check_only ? "--check-only" : "--dry-run") +
                     " with a Horovod elastic job: run it with the hosts in -H instead (hvrun --check-only -H ...)");
}

}  // namespace

CliResult parse_command_line(int argc, const char* const* argv) {
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + std::max(argc, 0));

  CliResult result;
  LaunchOptions& o = result.options;
  CliBindings b(o);
  CLI::App app;
  define_options(app, b);
  const std::vector<std::string> rewritten = normalize_option_words(args, app);
  std::vector<std::string> reversed(rewritten.rbegin(), rewritten.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    result.action = CliAction::kExit;
    result.exit_code = app.exit(e, std::cout, std::cerr);
    return result;
  } catch (const CLI::CallForVersion& e) {
    result.action = CliAction::kExit;
    result.exit_code = app.exit(e, std::cout, std::cerr);
    return result;
  } catch (const CLI::ExcludesError& e) {
    if (b.hosts_opt->count() > 0 && b.hostfile_opt->count() > 0)
      throw UsageError("-H/--hosts and --hostfile exclude each other; give one of them");
    throw UsageError(std::string(e.what()) + "; give one of them");
  } catch (const CLI::ParseError& e) {
    throw UsageError(describe(app, e));
  }

  // With prefix_command, CLI11 leaves in remaining(): the unknown options, then `--` if it was given,
  // then the command, which runs to the end of argv. The command is taken from the original argv, so
  // that a `-np` inside it stays as typed.
  const std::vector<std::string> rest = app.remaining();
  if (!rest.empty()) {
    const std::string& first = rest.front();
    if (first.size() > 1 && first.front() == '-' && first != "--") {
      throw UsageError("unknown option '" + first + "' (did you mean " + closest_option(first, app) + "?)");
    }
    const std::size_t length = rest.size() - (first == "--" ? 1 : 0);
    o.command.assign(args.end() - static_cast<long>(length), args.end());
  }
  if (b.horovodrun.check_build) {
    std::cout << check_build_text();
    result.action = CliAction::kExit;
    return result;
  }
  settle_horovodrun_options(app, b.horovodrun, o);
  for (const auto* flag : {"--mpi-args", "--binding-args"}) {
    if (app.get_option(flag)->count() == 0) continue;
    shell_words(flag == std::string("--mpi-args") ? o.mpi_args : o.binding_args, flag);  // syntax errors stop here
    if (!o.mpi) spdlog::warn("{} applies only with --mpi (as in horovodrun); ignored", flag);
  }
  // Options that contradict each other are refused rather than one silently winning.
  if (o.check_only && o.dry_run) {
    throw UsageError("--check-only and --dry-run exclude each other (--dry-run contacts no host; --check-only "
                     "connects and probes); give one of them");
  }
  if (o.json && !o.check_only) throw UsageError("--json only applies to --check-only; add --check-only or drop --json");
  if (b.rsh_opt->count() > 0) {
    if (o.rsh_agent.find_first_not_of(" \t") == std::string::npos)
      throw UsageError("--rsh-agent: empty command; give one that runs `CMD HOST COMMAND...`, e.g. 'docker exec -i'");
    for (const CLI::Option* ssh_only : {b.port_opt, b.identity_opt, b.strict_opt, b.connect_timeout_opt})
      if (ssh_only->count() > 0)
        throw UsageError(label_of(*ssh_only) + " applies to hvrun's own SSH, which --rsh-agent replaces; put it in "
                         "the --rsh-agent command instead (e.g. --rsh-agent 'ssh -p 2222')");
  }
  if (o.max_restarts > 0 && o.mpi)
    throw UsageError("--max-restarts: with --mpi, Open MPI's mpirun runs the ranks and hvrun cannot restart them; "
                     "drop --mpi (hvrun then starts the ranks itself) or drop --max-restarts");
  if (!o.sync_dirs.empty() && o.dry_run)
    throw UsageError("--sync copies files to the hosts, which --dry-run never contacts; drop one of them");
  if (o.matrix && !o.check_only) throw UsageError("--matrix only applies to --check-only; add --check-only or drop --matrix");
  if (!o.report_file.empty() && !o.check_only)
    throw UsageError("--report only applies to --check-only; add --check-only or drop --report");
  if (o.matrix && o.json) throw UsageError("--matrix and --json exclude each other (JSON has every pair); give one of them");
  if (o.command.empty() && !o.check_only) {
    throw UsageError("no command given: hvrun [options] command [args...]");
  }

  o.np = b.np;
  if (b.port_opt->count() > 0) o.ssh_port = b.ssh_port;
  // horovodrun's default comes from HOROVOD_START_TIMEOUT (seconds) when the flag is not given.
  const char* start_env = std::getenv("HOROVOD_START_TIMEOUT");
  if (app.get_option("--start-timeout")->count() == 0 && start_env != nullptr && *start_env != '\0') {
    std::string text = start_env;
    if (const std::string why = seconds(false)(text); !why.empty()) throw UsageError("HOROVOD_START_TIMEOUT: " + why);
    b.start_timeout = std::stod(text);
  }
  o.start_timeout = std::max(to_millis(b.start_timeout), std::chrono::milliseconds(1));
  o.kill_grace = to_millis(b.kill_grace);
  o.probe_timeout = std::max(to_millis(b.probe_timeout), std::chrono::milliseconds(1));
  o.ssh_connect_timeout = std::max(to_millis(b.ssh_connect_timeout), std::chrono::milliseconds(1));
  o.heartbeat_timeout = std::max(to_millis(b.heartbeat_timeout), std::chrono::milliseconds(1));
  o.stall_timeout = to_millis(b.stall_timeout);
  o.log_level = choose_log_level(o.verbose, b.level_opt->count() > 0
                                                ? std::optional<LogLevel>(spdlog::level::from_str(b.log_level))
                                                : std::nullopt);
  if (app.get_option("--ranks-filter")->count() > 0) o.logs.ranks = parse_rank_list(b.ranks_filter, "--ranks-filter");
  if (b.subsys_opt->count() > 0) o.log_subsys = parse_log_subsys(b.log_subsys, "--hvrun-log-subsys");
  for (const auto& item : b.env) o.env.push_back(split_env(item));
  NicFilter::parse(o.network_interfaces);  // syntax errors stop here, before any host is contacted

  if (b.hosts_opt->count() > 0) {
    std::string joined;
    for (const auto& list : b.host_lists) {
      parse_host_list(list);  // each -H checked alone first, so an error quotes what was typed
      joined += (joined.empty() ? "" : ",") + list;
    }
    o.hosts = parse_host_list(joined);
  } else if (b.hostfile_opt->count() > 0) {
    o.hosts = read_hostfile(b.hostfile);
  }
  // Inside a Slurm allocation its nodes and tasks are the default hosts and slots, and -np defaults to
  // its tasks (all slots).
  std::optional<SlurmAllocation> allocation;
  if (o.rsh_agent.empty() && (o.hosts.empty() || b.launcher == "auto" || b.launcher == "slurm"))
    allocation = slurm_allocation(process_environment());
  if (o.hosts.empty())
    o.hosts = allocation ? allocation->nodes : std::vector<HostSpec>{HostSpec{"localhost", b.np > 0 ? b.np : 1}};
  o.launcher = choose_launcher(b.launcher, !o.rsh_agent.empty(), allocation, o.hosts);
  settle_torchrun_options(app, b.torchrun, o);
  if (o.min_np > 0 && o.per_host_count == PerHostCount::kNone) {  // else once counted (device_count.hpp)
    long slots = 0;
    for (const HostSpec& h : o.hosts) slots += h.slots;
    const long np = o.np > 0 ? o.np : slots;
    if (o.min_np > np)
      throw UsageError("--min-np " + std::to_string(o.min_np) + " exceeds the job's " + std::to_string(np) +
                       " ranks (-np, or the hosts' slots); give --min-np at most " + std::to_string(np));
  }
  if (o.elastic) settle_elastic_job(o, b.hosts_opt->count() > 0 || b.hostfile_opt->count() > 0);
  if (!o.sync_dirs.empty() && o.launcher != AgentLauncher::kSsh)
    throw UsageError(std::string("--sync copies files over hvrun's own SSH, which ") +
                     (o.launcher == AgentLauncher::kRsh ? "--rsh-agent" : "srun (--launcher slurm)") +
                     " replaces; copy the directory to the hosts yourself, or start with --launcher ssh");
  return result;
}

}  // namespace hvrun

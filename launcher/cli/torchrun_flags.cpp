#include "launcher/cli/torchrun_flags.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <regex>
#include <set>

#include <CLI/CLI.hpp>

#include "common/error.hpp"
#include "common/local_hostname.hpp"
#include "launcher/cli/help_formatter.hpp"

namespace hvrun {

namespace {

namespace g = help_group;

// torchrun's rendezvous backends; hvrun serves the ranks' env:// rendezvous itself, so any will do.
constexpr std::string_view kBackends[] = {"c10d", "static", "etcd", "etcd-v2"};

// torchrun's per-host counts that hvrun learns from each host (launcher/cli/device_count.hpp).
constexpr std::pair<std::string_view, PerHostCount> kCountedPerHost[] = {
    {"gpu", PerHostCount::kGpu}, {"cpu", PerHostCount::kCpu}, {"auto", PerHostCount::kAuto}};

// What runs a script by path under runpy in the interpreter itself (--run-path): with `-c`, sys.argv[1:]
// is the script and its arguments.
constexpr const char* kRunPathCode =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

// torchrun's options that take text, checked after the parse: (names, field, value's name, help).
struct TextOption {
  const char* names;
  std::string TorchrunFlags::*field;
  const char* type;
  const char* help;
};
const TextOption kTextOptions[] = {
    {"--nnodes", &TorchrunFlags::nnodes, "NODES",
     "Hosts, N or MIN:MAX: checked against the hosts given; MIN:MAX with --max-restarts lets a restart go on "
     "with MIN hosts"},
    {"--nproc-per-node,--nproc_per_node", &TorchrunFlags::nproc_per_node, "N",
     "Ranks on every host (instead of -np and slots); gpu, cpu or auto: each host's own count, asked of the host"},
    {"--role", &TorchrunFlags::role, "NAME", "ROLE_NAME for the ranks (default: default)"},
    {"--rdzv-id,--rdzv_id", &TorchrunFlags::rdzv_id, "ID", "The run's id: TORCHELASTIC_RUN_ID (default: hvrun-HOST-PID)"},
    {"--rdzv-backend,--rdzv_backend", &TorchrunFlags::rdzv_backend, "NAME",
     "Accepted: c10d, static, etcd, etcd-v2 (hvrun serves env:// itself)"},
    {"--rdzv-endpoint,--rdzv_endpoint", &TorchrunFlags::rdzv_endpoint, "ENDPOINT",
     "HOST[:PORT]: accepted when HOST is one of the hosts"},
    {"--rdzv-conf,--rdzv_conf", &TorchrunFlags::rdzv_conf, "CONF",
     "KEY=VALUE,...: join_timeout sets --start-timeout; the other keys are torchrun's own"},
    {"--master-addr,--master_addr", &TorchrunFlags::master_addr, "HOST",
     "Accepted when it names the first host (rank 0's)"},
    {"--local-addr,--local_addr", &TorchrunFlags::local_addr, "ADDR", "Accepted with one host (else: --network-interface)"},
    {"--log-dir,--log_dir", &TorchrunFlags::log_dir, "DIR",
     "Gather every rank's stdout and stderr here, on this machine: RUN_ID_XXXXXX/attempt_N/HOST/LOCAL_RANK/"
     "{stdout,stderr}.log"},
    {"-r,--redirects", &TorchrunFlags::redirects, "SPEC",
     "Streams to the files instead of the console: 0 none, 1 stdout, 2 stderr, 3 both; or per local rank, "
     "0:1,1:2 (default: 0)"},
    {"-t,--tee", &TorchrunFlags::tee, "SPEC", "Streams to the files and the console, as --redirects (default: 0)"},
    {"--local-ranks-filter,--local_ranks_filter", &TorchrunFlags::local_ranks_filter, "LIST",
     "Show only these local ranks' lines on the console, e.g. 0 (the files keep all)"},
};

std::string first_name(const char* names) {
  const std::string all = names;
  return all.substr(0, all.find(','));
}

bool given(const CLI::App& app, const std::string& name) {
  const CLI::Option* opt = app.get_option_no_throw(name);
  return opt != nullptr && opt->count() > 0;
}

std::optional<int> positive(std::string_view text) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 1) return std::nullopt;
  return n;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_loopback_or_self(const std::string& name) {
  const std::string n = lower(name);
  return n == "localhost" || n == "127.0.0.1" || n == "::1" || n == "[::1]" || n == lower(local_hostname());
}

// Whether `name` can only mean one of `hosts`: the same name, or this machine named two ways.
bool names_one_of(const std::string& name, const std::vector<HostSpec>& hosts) {
  for (const HostSpec& h : hosts) {
    if (lower(h.name) == lower(name)) return true;
    if (is_loopback_or_self(name) && is_loopback_or_self(h.name)) return true;
  }
  return false;
}

std::string host_names(const std::vector<HostSpec>& hosts) {
  std::string out;
  for (const HostSpec& h : hosts) out += (out.empty() ? "" : ", ") + h.name;
  return out;
}

// --nnodes N or MIN:MAX, as torchrun reads it.
std::pair<int, int> node_range(const std::string& text) {
  const auto colon = text.find(':');
  const auto lo = positive(std::string_view(text).substr(0, colon));
  const auto hi = colon == std::string::npos ? lo : positive(std::string_view(text).substr(colon + 1));
  if (!lo || !hi || *lo > *hi)
    throw UsageError("--nnodes: '" + text + "' is not a number of nodes N or a range MIN:MAX (1 <= MIN <= MAX)");
  return {*lo, *hi};
}

// --rdzv-endpoint/--master-addr HOST[:PORT] (IPv6 in brackets): the host.
std::string endpoint_host(const std::string& endpoint) {
  static const std::regex form(R"((\[[^\]]+\]|[^:\[\]]+)(:(\d{1,5}))?)");
  std::smatch m;
  if (!std::regex_match(endpoint, m, form) || (m[3].matched && std::stoi(m[3].str()) > 65535))
    throw UsageError("--rdzv-endpoint: '" + endpoint + "' is not HOST[:PORT]");
  return m[1].str();
}

// The interpreter of the torchrun form: PYTHON_EXEC from -x (a bare -x passes hvrun's), else hvrun's
// environment, else python3.
std::string python_of(const LaunchOptions& o) {
  for (const auto& [name, value] : o.env)
    if (name == "PYTHON_EXEC" && value && !value->empty()) return *value;
  const char* exec = std::getenv("PYTHON_EXEC");
  return exec != nullptr && *exec != '\0' ? exec : "python3";
}

void check_rdzv_conf(const std::string& conf, LaunchOptions& o, bool start_timeout_given) {
  std::size_t at = 0;
  while (at <= conf.size()) {
    const auto comma = std::min(conf.find(',', at), conf.size());
    const std::string item = conf.substr(at, comma - at);
    at = comma + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == 0 || eq == std::string::npos)
      throw UsageError("--rdzv-conf: '" + item + "' is not KEY=VALUE (give KEY1=VALUE1,KEY2=VALUE2)");
    if (item.substr(0, eq) != "join_timeout") continue;  // the others tune torchrun's own rendezvous
    const auto seconds = positive(std::string_view(item).substr(eq + 1));
    if (!seconds) throw UsageError("--rdzv-conf: join_timeout '" + item.substr(eq + 1) + "' is not whole seconds > 0");
    if (!start_timeout_given) o.start_timeout = std::chrono::seconds(*seconds);
  }
}

// --nproc-per-node gpu, cpu or auto: each host's own count, learnt before the plan is made
// (launcher/start/device_census.hpp); here only what cannot go with it.
void settle_counted(const std::string& value, LaunchOptions& o) {
  const auto* kind = std::find_if(std::begin(kCountedPerHost), std::end(kCountedPerHost),
                                  [&](const auto& k) { return k.first == value; });
  if (kind == std::end(kCountedPerHost))
    throw UsageError("--nproc-per-node: '" + value + "' is not a number of ranks per host, nor gpu, cpu or auto (" +
                     (lower(value) == "xpu" ? "hvrun counts NVIDIA GPUs and CPUs, not XPUs" : "each host's own count") +
                     "); e.g. --nproc-per-node 8 or --nproc-per-node gpu");
  const std::string flag = "--nproc-per-node " + value;
  if (o.elastic)
    throw UsageError(flag + ": the hosts of a Horovod elastic job come and go with the slots their discovery lines or "
                     "--slots-per-host give, so there is no host list to count before the start; give slots that way");
  for (const HostSpec& h : o.hosts)
    if (h.slots != 1)
      throw UsageError(flag + " runs as many ranks on every host as it has, and " + h.name + " has " +
                       std::to_string(h.slots) + " slots; drop the slots or give --nproc-per-node a number");
  if (o.np != 0)
    throw UsageError("-np " + std::to_string(o.np) + " and " + flag + " both set the ranks (torchrun's are the hosts' "
                     "counts added up); drop -np");
  o.per_host_count = kind->second;
}

// --nproc-per-node and --nnodes against the hosts: every host runs the same number of ranks.
void settle_sizes(const CLI::App& app, const TorchrunFlags& f, LaunchOptions& o) {
  const int hosts = static_cast<int>(o.hosts.size());
  const bool hosts_given = given(app, "--hosts") || given(app, "--hostfile");
  if (f.standalone && hosts > 1)
    throw UsageError("--standalone runs one node (torchrun's), and the hosts are " + std::to_string(hosts) + " (" +
                     host_names(o.hosts) + "); drop --standalone to run on all of them");
  std::optional<int> per_host;
  if (given(app, "--nproc-per-node")) {
    per_host = positive(f.nproc_per_node);
    if (!per_host) settle_counted(f.nproc_per_node, o);
  }
  if (per_host) {
    for (HostSpec& h : o.hosts) {
      if (h.slots != 1 && h.slots != *per_host)
        throw UsageError("--nproc-per-node " + std::to_string(*per_host) + " runs that many ranks on every host, and " +
                         h.name + " has " + std::to_string(h.slots) + " slots; drop the slots or make them agree");
      h.slots = *per_host;
    }
    const int np = *per_host * hosts;
    if (o.np != 0 && o.np != np)
      throw UsageError("-np " + std::to_string(o.np) + " contradicts --nproc-per-node " + std::to_string(*per_host) +
                       " on " + std::to_string(hosts) + " hosts (" + std::to_string(np) + " ranks); drop -np");
    o.np = np;
  }
  if (!given(app, "--nnodes")) return;
  const auto [lo, hi] = node_range(f.nnodes);
  if (!hosts_given && hosts < lo)
    throw UsageError("--nnodes " + f.nnodes + " needs " + std::to_string(lo) + " hosts, and hvrun starts every node "
                     "from this one command: give them with -H or --hostfile (e.g. -H node1,node2)");
  if (hosts < lo || hosts > hi)
    throw UsageError("--nnodes " + f.nnodes + " contradicts the " + std::to_string(hosts) + " hosts given (" +
                     host_names(o.hosts) + "); give --nnodes " + std::to_string(hosts) + " or that many hosts");
  if (lo < hosts && o.max_restarts > 0) {
    // MIN:MAX under restarts: an attempt may go on with MIN hosts' ranks once hosts are lost.
    if (o.min_np > 0) throw UsageError("--nnodes MIN:MAX and --min-np both set the fewest ranks; give one of them");
    if (o.per_host_count != PerHostCount::kNone) {
      o.counted_min_hosts = lo;  // times the fewest count, once the hosts are counted
      return;
    }
    int fewest = std::numeric_limits<int>::max();
    for (const HostSpec& h : o.hosts) fewest = std::min(fewest, h.slots);
    o.min_np = lo * fewest;
  }
}

// The options that name hosts or addresses: each must agree with hvrun's plan (rank 0 on the first host).
void settle_rendezvous(const CLI::App& app, const TorchrunFlags& f, LaunchOptions& o) {
  const int hosts = static_cast<int>(o.hosts.size());
  std::string backend = f.standalone ? "c10d" : "static";
  if (given(app, "--rdzv-backend") && !f.standalone) {
    backend = f.rdzv_backend;
    if (std::find(std::begin(kBackends), std::end(kBackends), backend) == std::end(kBackends))
      throw UsageError("--rdzv-backend: '" + backend + "' is not one of torchrun's backends (c10d, static, etcd, "
                       "etcd-v2); hvrun serves the ranks' rendezvous itself, so any of them will do");
  }
  if (given(app, "--rdzv-endpoint") && !f.standalone && !f.rdzv_endpoint.empty()) {
    const std::string host = endpoint_host(f.rdzv_endpoint);
    if (!names_one_of(host, o.hosts))
      throw UsageError("--rdzv-endpoint " + f.rdzv_endpoint + ": " + host + " is not one of the hosts (" +
                       host_names(o.hosts) + "), and hvrun serves the rendezvous on one of them itself; name one "
                       "of them, or drop --rdzv-endpoint");
  }
  if (given(app, "--node-rank") && (hosts > 1 || f.node_rank != 0))
    throw UsageError("--node-rank " + std::to_string(f.node_rank) + ": hvrun starts all " + std::to_string(hosts) +
                     " hosts from this one command and numbers them in the order given (GROUP_RANK); drop --node-rank");
  if (given(app, "--local-addr") && hosts > 1)
    throw UsageError("--local-addr: hvrun finds each host's address by probing its NICs; to choose them yourself give "
                     "--network-interface (NIC names or CIDR subnets), and drop --local-addr");
  if (backend != "static") return;  // torchrun uses --master-addr/--master-port only with it
  if (given(app, "--master-addr") && !names_one_of(f.master_addr, {o.hosts.front()}))
    throw UsageError("--master-addr " + f.master_addr + ": hvrun runs rank 0 on the first host, " +
                     o.hosts.front().name + ", and gives the ranks its address; put " + f.master_addr +
                     " first in the hosts, or drop --master-addr");
  if (given(app, "--master-port")) {
    for (const auto& [name, value] : o.env)
      if (name == "MASTER_PORT")
        throw UsageError("--master-port and -x MASTER_PORT both set the ranks' MASTER_PORT; give one of them");
    o.env.emplace_back("MASTER_PORT", std::to_string(f.master_port));
  }
}

// The options that ask for torchrun's form: all of torchrun's but --max-restarts (hvrun's own too) and
// the log options, which hvrun's own form takes as well.
bool torchrun_form(const CLI::App& app) {
  static const std::set<std::string> either{"-h",      "--max-restarts", "--log-dir",
                                            "-r",      "-t",             "--local-ranks-filter"};
  for (const TorchrunOption& t : torchrun_options()) {
    const std::string name = first_name(t.names);
    if (!either.contains(name) && given(app, name)) return true;
  }
  return false;
}

// --log-dir, --redirects, --tee, --local-ranks-filter (rank_logs.hpp), and what they cannot go with.
void settle_logs(const CLI::App& app, const TorchrunFlags& f, LaunchOptions& o) {
  const bool dir = given(app, "--log-dir"), redirects = given(app, "-r"), tee = given(app, "-t");
  if (dir && f.log_dir.empty()) throw UsageError("--log-dir: give a directory, e.g. --log-dir logs");
  o.logs.dir = f.log_dir;
  if (redirects) o.logs.redirects = StreamSpec::parse(f.redirects, "--redirects");
  if (tee) o.logs.tee = StreamSpec::parse(f.tee, "--tee");
  if (given(app, "--local-ranks-filter"))
    o.logs.local_ranks = parse_rank_list(f.local_ranks_filter, "--local-ranks-filter");
  const bool files = dir || o.logs.redirects.any() || o.logs.tee.any();
  const bool console = !o.logs.local_ranks.empty() || !o.logs.ranks.empty() || o.logs.prefix_host;
  if (o.elastic && (files || console))
    throw UsageError("--log-dir, --redirects, --tee and the console filters do not apply to a Horovod elastic job; "
                     "use --output-filename DIR");
  if (!files) return;
  const std::string flag = dir ? "--log-dir" : redirects ? "--redirects" : "--tee";
  if (!o.output_filename.empty())
    throw UsageError(flag + " and --output-filename both write the ranks' output to files; give one of them");
  if (o.mpi) throw UsageError(flag + ": with --mpi, mpirun carries the ranks' output; drop one of them");
}

}  // namespace

const std::vector<TorchrunOption>& torchrun_options() {
  static const std::vector<TorchrunOption> table{
      {"-h,--help", ""},
      {"--nnodes", ""},
      {"--nproc-per-node,--nproc_per_node", ""},
      {"--rdzv-backend,--rdzv_backend", ""},
      {"--rdzv-endpoint,--rdzv_endpoint", ""},
      {"--rdzv-id,--rdzv_id", ""},
      {"--rdzv-conf,--rdzv_conf", ""},
      {"--standalone", ""},
      {"--max-restarts,--max_restarts", ""},
      {"--monitor-interval,--monitor_interval", ""},
      {"--start-method,--start_method", ""},
      {"--event-log-handler,--event_log_handler",
       "hvrun has no torchelastic event handlers; its decisions print with --verbose. Drop the option"},
      {"--role", ""},
      {"-m,--module", ""},
      {"--no-python,--no_python", ""},
      {"--run-path,--run_path", ""},
      {"--log-dir,--log_dir", ""},
      {"-r,--redirects", ""},
      {"-t,--tee", ""},
      {"--local-ranks-filter,--local_ranks_filter", ""},
      {"--node-rank,--node_rank", ""},
      {"--master-addr,--master_addr", ""},
      {"--master-port,--master_port", ""},
      {"--local-addr,--local_addr", ""},
      {"--logs-specs,--logs_specs",
       "hvrun loads no torchrun.logs_specs plugins; it writes every rank's output on this machine with "
       "--log-dir DIR (and --redirects, --tee). Drop the option"},
      {"--numa-binding,--numa_binding",
       "hvrun does not bind ranks to NUMA nodes; run the command under numactl (--no-python numactl "
       "--cpunodebind=0 python3 train.py), or give --mpi with --binding-args"},
      {"--signals-to-handle,--signals_to_handle",
       "hvrun takes no list: SIGINT and SIGTERM stop every rank on every host (SIGTERM, then SIGKILL after "
       "--kill-grace). Drop the option"},
  };
  return table;
}

void add_torchrun_options(CLI::App& app, TorchrunFlags& f) {
  const char* group = g::kTorchrun;
  for (const TextOption& t : kTextOptions) app.add_option(t.names, f.*t.field, t.help)->type_name(t.type)->group(group);
  app.add_flag("-m,--module", f.module, "Run the command's first word as a Python module (python3 -u -m MODULE)")
      ->group(group);
  app.add_flag("--no-python,--no_python", f.no_python, "Run the command as it is, not as a Python script")->group(group);
  app.add_flag("--run-path,--run_path", f.run_path, "Run the script by runpy.run_path in the interpreter")
      ->group(group);
  app.add_flag("--standalone", f.standalone, "One node (accepted with one host)")->group(group);
  app.add_option("--master-port,--master_port", f.master_port, "MASTER_PORT for the ranks (static rendezvous)")
      ->check(CLI::Range(1, 65535))
      ->type_name("PORT")
      ->group(group);
  app.add_option("--node-rank,--node_rank", f.node_rank, "Accepted as 0 with one host (hvrun numbers the hosts)")
      ->type_name("N")
      ->group(group);
  app.add_option("--monitor-interval,--monitor_interval", f.monitor_interval,
                 "Accepted: hvrun's agents see a rank's end at once")
      ->check(CLI::PositiveNumber)
      ->type_name("SECONDS")
      ->group(group);
  app.add_option("--start-method,--start_method", f.start_method, "Accepted: every rank is a process of its own")
      ->check(CLI::IsMember({"spawn", "fork", "forkserver"}))
      ->type_name("METHOD")
      ->group(group);
  for (const TorchrunOption& t : torchrun_options())
    if (*t.refusal != '\0') app.add_option(t.names, "")->expected(1)->type_name("VALUE")->group("");
}

void settle_torchrun_options(const CLI::App& app, const TorchrunFlags& f, LaunchOptions& o) {
  for (const TorchrunOption& t : torchrun_options())
    if (*t.refusal != '\0' && given(app, first_name(t.names))) throw UsageError(first_name(t.names) + ": " + t.refusal);
  settle_logs(app, f, o);
  if (!torchrun_form(app)) return;
  o.torchrun_form = true;
  if (f.module && f.no_python)
    throw UsageError("-m/--module runs a Python module and --no-python runs no Python (as in torchrun); give one");
  settle_sizes(app, f, o);
  settle_rendezvous(app, f, o);
  check_rdzv_conf(f.rdzv_conf, o, given(app, "--start-timeout"));
  if (given(app, "--rdzv-id") && f.rdzv_id != "none" && !f.standalone) o.run_id = f.rdzv_id;
  if (given(app, "--role")) {
    if (f.role.empty()) throw UsageError("--role: give a name (ROLE_NAME), e.g. --role trainer");
    o.role = f.role;
  }
  if (o.command.empty()) return;
  static const std::regex python_word(R"((.*/)?python[0-9.]*)");
  if (!f.no_python && std::regex_match(o.command.front(), python_word))
    throw UsageError("under torchrun's options the command is a script that hvrun runs with Python, as torchrun "
                     "does; drop '" + o.command.front() + "' (or add --no-python to run the command as it is)");
  o.command = interpreter_command(o.command, f, python_of(o));
}

std::vector<std::string> interpreter_command(const std::vector<std::string>& command, const TorchrunFlags& f,
                                             std::string_view python) {
  if (command.empty() || (f.no_python && !f.run_path)) return command;
  std::vector<std::string> argv{std::string(python), "-u"};
  if (f.run_path) {
    argv.insert(argv.end(), {"-c", kRunPathCode});
  } else if (f.module) {
    argv.push_back("-m");
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace hvrun

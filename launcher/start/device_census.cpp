#include "launcher/start/device_census.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <spdlog/spdlog.h>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/file_digest.hpp"
#include "launcher/base/shell_quote.hpp"
#include "launcher/ranks/env_policy.hpp"
#include "launcher/ssh/ssh_session.hpp"
#include "launcher/start/agent_starter.hpp"
#include "launcher/start/host_locality.hpp"
#include "launcher/start/start_progress.hpp"

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The first line of the answer: what a login shell prints before it (a greeting) is not the answer.
constexpr const char* kMarker = "hvrun-device-census";
constexpr milliseconds kLocalityTimeout{5000};
// Past a host's own bounds (libssh's connect steps, the command's timeout), the census stops waiting.
constexpr milliseconds kWaitSlack{5000};

std::string trimmed(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The value of "GPU UUID:" in a driver's information file; "" without one.
std::string uuid_in(const std::string& information) {
  for (std::size_t at = 0; at < information.size();) {
    const std::size_t end = std::min(information.find('\n', at), information.size());
    const std::string line = information.substr(at, end - at);
    if (line.starts_with("GPU UUID:")) return trimmed(line.substr(9));
    at = end + 1;
  }
  return {};
}

std::optional<std::string> env_value(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
}

// One host's answer over SSH, or what went wrong (one line naming the host).
struct Answer {
  std::optional<HostDevices> devices;
  std::string error;
};

Answer ask(const LaunchOptions& o, const std::string& host, milliseconds timeout) {
  try {
    SshSession session = SshSession::connect(ssh_target_of(o, host));
    const RunResult r = session.run(device_census_command(), timeout);
    if (r.exit_status != 0) {
      const std::string said = trimmed(r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1));
      return {std::nullopt, host + ": counting its CPUs and GPUs ended with " +
                                (r.exit_status < 0 ? "signal " + r.exit_signal : "exit " + std::to_string(r.exit_status)) +
                                (said.empty() ? "" : " (" + said + ")") + "; check that host's /bin/sh and getconf"};
    }
    return {parse_device_census(host, r.out), {}};
  } catch (const std::exception& e) {
    return {std::nullopt, e.what()};
  }
}

// The remote hosts' answers, asked on at most --connect-concurrency detached threads (libssh's connect
// cannot be interrupted; a thread still in it when the census gives up finds the state it shares alone).
// The first host that fails, or outlasts its bound, ends the census with its error, naming `flag`.
std::vector<HostDevices> ask_all(const LaunchOptions& o, const std::vector<std::string>& hosts, const std::string& flag) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<Answer> answers;
    std::vector<Clock::time_point> turns;  // when each host's asking began; {} until then
    std::size_t next = 0, done = 0;
  };
  const auto shared = std::make_shared<Shared>();
  shared->answers.resize(hosts.size());
  shared->turns.resize(hosts.size());
  const milliseconds timeout = shell_timeout_of(o.start_timeout);
  // libssh's connect: the name lookup and TCP connect, then the handshake and each round trip after it.
  const milliseconds bound = o.ssh_connect_timeout * 4 + timeout + kWaitSlack;
  const std::size_t threads = std::min<std::size_t>(hosts.size(), static_cast<std::size_t>(std::max(o.connect_concurrency, 1)));
  for (std::size_t t = 0; t < threads; ++t) {
    std::thread([shared, o, hosts, timeout] {
      for (;;) {
        std::size_t i;
        {
          std::lock_guard lock(shared->mutex);
          if (shared->next == hosts.size()) return;
          i = shared->next++;
          shared->turns[i] = Clock::now();
        }
        Answer a = ask(o, hosts[i], timeout);
        std::lock_guard lock(shared->mutex);
        shared->answers[i] = std::move(a);
        ++shared->done;
        shared->changed.notify_all();
      }
    }).detach();
  }
  std::unique_lock lock(shared->mutex);
  for (;;) {
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const Answer& a = shared->answers[i];
      if (!a.error.empty()) throw Error(a.error + " (while counting its CPUs and GPUs for " + flag + ")");
      if (!a.devices && shared->turns[i] != Clock::time_point{} && Clock::now() - shared->turns[i] > bound)
        throw TimeoutError(hosts[i] + ": no count of its CPUs and GPUs for " + flag + " within " + seconds_text(bound) +
                           " (--ssh-connect-timeout, --start-timeout); check that host, or give --nproc-per-node a number");
    }
    if (shared->done == hosts.size()) break;
    shared->changed.wait_for(lock, milliseconds(200));
  }
  std::vector<HostDevices> out;
  for (const Answer& a : shared->answers) out.push_back(*a.devices);
  return out;
}

}  // namespace

std::string device_census_command() {
  const std::string script = std::string("echo ") + kMarker +
                             "; echo cpus $(getconf _NPROCESSORS_ONLN) || exit 1; d=/proc/driver/nvidia/gpus; "
                             "[ -d $d ] || exit 0; echo driver; for g in $(ls $d); do "
                             "echo gpu $(sed -n 's/^GPU UUID:[[:space:]]*//p' $d/$g/information 2>/dev/null); done";
  return "/bin/sh -c " + shell_quote(script);
}

HostDevices parse_device_census(const std::string& host, const std::string& out) {
  const auto bad = [&](const std::string& why) {
    return Error(host + ": its count of CPUs and GPUs for --nproc-per-node is not what hvrun asked for (" + why +
                 "); check what that host's login shell prints");
  };
  const std::string marker = std::string(kMarker) + "\n";
  const std::size_t after = out.starts_with(marker) ? 0 : out.find("\n" + marker);
  if (after == std::string::npos) throw bad("no answer");
  HostDevices d;
  bool cpus = false;
  std::size_t at = after + (out.starts_with(marker) ? 0 : 1) + marker.size();
  while (at < out.size()) {
    const std::size_t end = std::min(out.find('\n', at), out.size());
    const std::string line = trimmed(out.substr(at, end - at));
    at = end + 1;
    if (!cpus) {
      const auto [p, ec] = std::from_chars(line.data() + std::min<std::size_t>(5, line.size()), line.data() + line.size(), d.cpus);
      if (!line.starts_with("cpus ") || ec != std::errc() || p != line.data() + line.size() || d.cpus < 1)
        throw bad("'" + line + "' where its CPUs were expected");
      cpus = true;
    } else if (line == "driver" && !d.gpus) {
      d.gpus.emplace();
    } else if (d.gpus && (line == "gpu" || line.starts_with("gpu "))) {
      d.gpus->push_back(trimmed(line.substr(3)));
    } else {
      throw bad("'" + line + "'");
    }
  }
  if (!cpus) throw bad("no CPU count");
  return d;
}

HostDevices local_devices(const std::string& nvidia_gpus) {
  HostDevices d;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) throw_errno("sysconf(_SC_NPROCESSORS_ONLN)", "counting this machine's CPUs for --nproc-per-node");
  d.cpus = static_cast<int>(std::min<long>(cpus, 1 << 20));
  struct stat st{};
  if (::stat(nvidia_gpus.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return d;
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(nvidia_gpus.c_str()), ::closedir);
  if (!dir) throw_errno("opendir " + nvidia_gpus, "counting this machine's GPUs for --nproc-per-node");
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir.get()))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  std::sort(names.begin(), names.end());  // as ls lists them
  d.gpus.emplace();
  for (const std::string& n : names) d.gpus->push_back(uuid_in(read_file_head(nvidia_gpus + "/" + n + "/information", 64u << 10)));
  return d;
}

void take_device_census(LaunchOptions& o) {
  if (o.per_host_count == PerHostCount::kNone || o.check_only) return;
  const std::string flag = "--nproc-per-node " + per_host_count_name(o.per_host_count);
  std::vector<std::string> names, remote;
  for (const HostSpec& h : o.hosts) names.push_back(h.name);
  const std::vector<bool> local = find_local_hosts(names, kLocalityTimeout);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (local[i]) continue;
    if (o.dry_run)
      throw UsageError(flag + " counts each host's devices on the host, and --dry-run contacts none (" + names[i] +
                       "); give --nproc-per-node a number with --dry-run");
    if (o.launcher != AgentLauncher::kSsh)
      throw UsageError(flag + " counts each host's devices over hvrun's own SSH, which " +
                       (o.launcher == AgentLauncher::kRsh ? "--rsh-agent" : "srun (--launcher slurm)") +
                       " replaces for " + names[i] + "; give --nproc-per-node a number" +
                       (o.launcher == AgentLauncher::kSlurm ? ", or --launcher ssh" : ""));
    remote.push_back(names[i]);
  }
  const std::vector<HostDevices> answers = ask_all(o, remote, flag);
  const EnvPolicy env(launcher_environment(), o);
  std::vector<int> counts;
  std::string said;
  for (std::size_t i = 0, r = 0; i < names.size(); ++i) {
    const HostDevices devices = local[i] ? local_devices() : answers[r++];
    const auto visible = env_value(local[i] ? env.local() : env.remote(), "CUDA_VISIBLE_DEVICES");
    counts.push_back(ranks_for(o.per_host_count, names[i], devices, visible));
    said += (said.empty() ? "" : ", ") + names[i] + " " + std::to_string(counts.back());
  }
  apply_counts(o, counts);
  spdlog::info("{}: {} ranks ({})", flag, o.np, said);
}

}  // namespace hvrun

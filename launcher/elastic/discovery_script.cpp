#include "launcher/elastic/discovery_script.hpp"

#include <signal.h>

#include "common/child_process.hpp"
#include "common/duration_text.hpp"
#include "common/open_files_limit.hpp"
#include "launcher/start/host_locality.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kOutputLimit = 1 << 20;
// Name lookups of a run's new hosts, all at once; a name not resolved by then counts as remote (SSH then
// names the failure).
constexpr std::chrono::milliseconds kDiscoveredResolveTimeout{5000};

// The last few non-empty lines of a script's stderr, joined for one message line.
std::string last_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  std::string out;
  for (std::size_t k = lines.size() > 3 ? lines.size() - 3 : 0; k < lines.size(); ++k)
    out += (out.empty() ? "" : " | ") + lines[k];
  return out.size() > 400 ? out.substr(out.size() - 400) : out;
}

DiscoveryRun run_once(const std::string& script, std::optional<int> slots, std::chrono::milliseconds timeout,
                      const std::function<bool(pid_t)>& started) {
  const std::string what = "--host-discovery-script " + script;
  ChildSpec spec{.argv = {"/bin/sh", "-c", script},
                 .stdio = {ChildStream::dev_null(), ChildStream::pipe("stdout of the discovery script"),
                           ChildStream::pipe("stderr of the discovery script")},
                 .own_group = true,
                 .start_by = StartBy::kSpawn,
                 .what = what};
  Child child;
  try {
    child = Child::start(spec);
  } catch (const SpawnError& e) {
    return {{}, what + ": cannot start /bin/sh: " + e.what(), {}};
  }
  restore_open_files_limit(child.pid(), what);
  if (!started(child.pid())) return {{}, what + ": stopped", {}};  // the loop is going away; ~Child kills it
  std::optional<ChildOutput> output = child.read_outputs(timeout, kOutputLimit);
  if (!output) {
    child.signal(SIGKILL);
    return {{}, what + " did not finish within " + seconds_text(timeout) + "; it must print the hosts and exit", {}};
  }
  const ExitStatus status = child.wait();
  if (status.code != 0) {
    const std::string err = last_lines(output->err);
    return {{}, what + " " + status.text() + (err.empty() ? "" : "; its stderr: " + err), {}};
  }
  try {
    return {parse_discovery_output(output->out, slots, script), {}, {}};
  } catch (const UsageError& e) {
    return {{}, e.what(), {}};
  }
}

}  // namespace

DiscoveryRun run_discovery_script(const std::string& script, std::optional<int> slots_per_host,
                                  std::chrono::milliseconds timeout) {
  return run_once(script, slots_per_host, timeout, [](pid_t) { return true; });
}

DiscoveryLoop::DiscoveryLoop(std::string script, std::optional<int> slots_per_host, std::chrono::milliseconds period,
                             std::chrono::milliseconds timeout, std::function<void(DiscoveryRun)> on_run)
    : script_(std::move(script)),
      slots_(slots_per_host),
      period_(period),
      timeout_(timeout),
      on_run_(std::move(on_run)),
      thread_([this] { loop(); }) {}

DiscoveryLoop::~DiscoveryLoop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (running_ > 0) signal_group(running_, SIGKILL);
  }
  wake_.notify_all();
  thread_.join();
}

void DiscoveryLoop::loop() {
  for (;;) {
    DiscoveryRun run = run_once(script_, slots_, timeout_, [this](pid_t pid) {
      std::lock_guard lock(mutex_);
      running_ = pid;
      return !stopping_;
    });
    {
      std::unique_lock lock(mutex_);
      running_ = -1;
      if (stopping_) return;
    }
    std::vector<std::string> fresh;
    for (const HostSlots& h : run.hosts)
      if (!local_.contains(h.host)) fresh.push_back(h.host);
    if (!fresh.empty()) {
      const std::vector<bool> is_local = find_local_hosts(fresh, kDiscoveredResolveTimeout);
      for (std::size_t i = 0; i < fresh.size(); ++i) local_[fresh[i]] = is_local[i];
    }
    for (const HostSlots& h : run.hosts) run.local[h.host] = local_.at(h.host);
    on_run_(std::move(run));
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, period_, [this] { return stopping_; })) return;
  }
}

}  // namespace hvrun

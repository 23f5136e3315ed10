#include "tests/support/lab.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "tests/support/child_process.hpp"

namespace hvrun::test {

namespace {
using namespace std::chrono_literals;

std::string lab_script() { return source_dir() + "/scripts/lab.sh"; }

std::vector<std::string> lab_env(const std::string& prefix) {
  return {"LAB_PREFIX=" + prefix, "LAB_DIR=/tmp/" + prefix};
}
}  // namespace

std::string Lab::default_prefix() {
  const char* prefix = std::getenv("HVRUN_TEST_LAB_PREFIX");
  return prefix && *prefix ? prefix : "hvtest";
}

std::optional<std::string> Lab::unavailable_reason() {
  if (::geteuid() != 0) return "skipped: lab tests need root (network namespaces, sshd); CI runs them as root";
  if (!std::filesystem::exists("/usr/sbin/sshd")) return "skipped: lab tests need /usr/sbin/sshd (openssh-server)";
  auto r = run({"/usr/bin/env", "ip", "netns", "list"}, 10s);
  if (r.exit_code != 0) return "skipped: `ip netns` does not work here: " + r.err;
  return std::nullopt;
}

Lab::Lab(int hosts, std::string prefix, std::vector<std::string> options) : prefix_(std::move(prefix)) {
  auto up = run({lab_script(), "up", std::to_string(hosts)}, 120s, [&] {
    auto e = lab_env(prefix_);
    e.push_back("LAB_RECREATE=1");
    e.insert(e.end(), options.begin(), options.end());
    return e;
  }());
  if (up.exit_code != 0) {
    run({lab_script(), "down"}, 60s, lab_env(prefix_));
    throw std::runtime_error("lab.sh up failed:\n" + up.out + up.err);
  }
  auto env = run({lab_script(), "env"}, 30s, lab_env(prefix_));
  std::istringstream lines(env.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("export ", 0) != 0) continue;
    const auto eq = line.find('=');
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') value = value.substr(1, value.size() - 2);
    vars_[line.substr(7, eq - 7)] = value;
  }
}

Lab::~Lab() { run({lab_script(), "down"}, 60s, lab_env(prefix_)); }

const std::string& Lab::var(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) throw std::runtime_error("lab.sh env has no " + name);
  return it->second;
}

std::vector<std::string> Lab::list(const std::string& name) const {
  std::vector<std::string> out;
  std::istringstream words(var(name));
  for (std::string w; words >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> Lab::on_host(int i, const std::vector<std::string>& cmd) const {
  std::vector<std::string> argv{"/usr/bin/env", "LAB_PREFIX=" + prefix_, "LAB_DIR=/tmp/" + prefix_, lab_script(),
                                "exec", std::to_string(i)};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

int Lab::control(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{lab_script()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, 60s, lab_env(prefix_)).exit_code;
}

std::vector<int> Lab::processes_on_host(int i, const std::string& marker) const {
  auto pids = run({"/usr/bin/env", "ip", "netns", "pids", prefix_ + "-h" + std::to_string(i)}, 10s);
  std::vector<int> out;
  std::istringstream words(pids.out);
  const auto marked = processes_with_marker(marker);
  for (int pid; words >> pid;)
    for (pid_t m : marked)
      if (m == pid) out.push_back(pid);
  return out;
}

}  // namespace hvrun::test

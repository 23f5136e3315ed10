#pragma once
// Test support: a network-namespace lab (scripts/lab.sh) for the life of one test. The destructor
// runs `lab.sh down`, so the lab is removed even when the test fails; a reaper process runs it when
// the test process dies without its destructor (a signal, ctest's timeout, SIGKILL).
#include <map>
#include <optional>
#include <string>
#include <vector>

// The first line of a lab test case: where lab tests cannot run (Lab::unavailable_reason) it warns
// "skipped: <why>" (ctest shows the case skipped) and returns. Needs Catch2's WARN in the test file.
#define HVRUN_SKIP_WITHOUT_LAB()                                          \
  do {                                                                    \
    if (auto hvrun_lab_why = ::hvrun::test::Lab::unavailable_reason()) { \
      WARN(*hvrun_lab_why);                                               \
      return;                                                             \
    }                                                                     \
  } while (0)

namespace hvrun::test {

class Lab {
 public:
  // Why lab tests cannot run here (not root, no `ip netns`, no sshd), or nothing when they can.
  static std::optional<std::string> unavailable_reason();

  // Brings up `hosts` hosts under `prefix`; throws with lab.sh's output when that fails. Waits first
  // (at most 2 minutes) for the lab of that prefix that another Lab or its reaper still holds
  // (/run/lock/hvrun-lab-PREFIX.lock, or in /tmp without /run/lock).
  explicit Lab(int hosts) : Lab(hosts, default_prefix()) {}
  // `options`: lab.sh settings for `up` ("LAB_CONTAINER_VETHS=40").
  Lab(int hosts, std::string prefix, std::vector<std::string> options = {});
  // $HVRUN_TEST_LAB_PREFIX, else "hvtest": two test runs at once on one machine need two prefixes.
  static std::string default_prefix();
  ~Lab();
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  // Values from `lab.sh env` (LAB_PORT, LAB_KEY, LAB_HOSTS, ...).
  const std::string& var(const std::string& name) const;
  std::vector<std::string> list(const std::string& name) const;  // a space-separated variable
  std::string host(int i) const { return list("LAB_HOSTS").at(static_cast<std::size_t>(i)); }

  // argv that runs `cmd` on host i (its namespace, hostname and /etc/hosts).
  std::vector<std::string> on_host(int i, const std::vector<std::string>& cmd) const;
  // Runs `lab.sh ARGS...` (cut, uncut, rekey, oneway, ...) and returns its exit code.
  int control(const std::vector<std::string>& args) const;
  // Processes in host i's namespace whose environment holds `marker`.
  std::vector<int> processes_on_host(int i, const std::string& marker) const;

 private:
  // Holds the prefix's lock and starts the reaper; throws when either cannot be had.
  void guard();
  // `lab.sh up`, then its variables; throws.
  void bring_up(int hosts, const std::vector<std::string>& options);
  // Tells the reaper that the lab is down and lets the lock go.
  void release() noexcept;

  std::string prefix_;
  std::map<std::string, std::string> vars_;
  int lock_fd_ = -1;    // flock on hvrun-lab-PREFIX.lock (guard()); the reaper shares it
  int reaper_fd_ = -1;  // the reaper's pipe: a byte says the lab is down, EOF that this process died
};

}  // namespace hvrun::test

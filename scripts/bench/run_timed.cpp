// run_timed — runs one command and records its wall time, CPU time and peak RSS, for scripts/bench.sh.
//
// Like /usr/bin/time, but with microsecond wall time, a timeout, and no second helper process inside
// the timed span (`timeout /usr/bin/time CMD` would add two fork+exec to every figure).
//
//   run_timed TIMEOUT_S RESULT_FILE COMMAND [ARGS...]
//
// COMMAND runs in its own process group with this process's stdin, stdout and stderr. After it exits,
// RESULT_FILE gets one line: "wall_ms user_ms sys_ms maxrss_kb status", where user/sys/maxrss are
// wait4's figures (the command and the children it waited for; maxrss is the largest of them) and
// status is its exit code, 128+N for signal N, or 124 when it ran past TIMEOUT_S (then its whole
// process group gets SIGKILL). A second line, "self_user_ms self_sys_ms", is the command's own CPU
// without its children's (read from /proc/PID/stat while it is a zombie, before it is reaped; 10 ms
// steps), e.g. hvrun's own against its local agent's, its ssh -G's and its --rsh-agent commands'.
// A third line, "peak_threads", is the most threads the command itself had at once (its
// /proc/PID/status "Threads:", sampled every 5 ms while it runs; 0 if never read).
// run_timed exits with that status; 125 when it cannot run at all.
//
// Build: g++ -std=c++20 -O2 run_timed.cpp -o run_timed
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace {

double now_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double tv_ms(const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; }

// utime and stime (fields 14 and 15 of /proc/PID/stat, after the command name in parentheses) in
// milliseconds; -1 each when unreadable.
void own_cpu_ms(pid_t pid, double& user, double& sys) {
  user = sys = -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream fields(line.substr(close + 2));  // from field 3 (state) on
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;
  long utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return;
  const double tick_ms = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  user = static_cast<double>(utime) * tick_ms;
  sys = static_cast<double>(stime) * tick_ms;
}

// "Threads:" of /proc/PID/status; 0 when unreadable (not started yet, or gone).
long threads_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::strtol(line.c_str() + 8, nullptr, 10);
  }
  return 0;
}

volatile sig_atomic_t timed_out = 0;
pid_t child = -1;

void on_alarm(int) {
  timed_out = 1;
  if (child > 0) kill(-child, SIGKILL);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: run_timed TIMEOUT_S RESULT_FILE COMMAND [ARGS...]\n");
    return 125;
  }
  char* end = nullptr;
  const long timeout_s = std::strtol(argv[1], &end, 10);
  if (end == argv[1] || *end != '\0' || timeout_s <= 0) {
    std::fprintf(stderr, "run_timed: bad timeout '%s'\n", argv[1]);
    return 125;
  }
  FILE* result = std::fopen(argv[2], "w");
  if (result == nullptr) {
    std::fprintf(stderr, "run_timed: cannot write %s: %s\n", argv[2], std::strerror(errno));
    return 125;
  }

  struct sigaction sa{};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);

  const double t0 = now_ms();
  child = fork();
  if (child < 0) {
    std::fprintf(stderr, "run_timed: fork: %s\n", std::strerror(errno));
    return 125;
  }
  if (child == 0) {
    setpgid(0, 0);
    execvp(argv[3], argv + 3);
    std::fprintf(stderr, "run_timed: cannot execute %s: %s\n", argv[3], std::strerror(errno));
    _exit(127);
  }
  setpgid(child, child);  // also from here, so the alarm's kill(-child) finds the group
  alarm(static_cast<unsigned>(timeout_s));

  // Wait without reaping first: the zombie's /proc/PID/stat still holds its own CPU times. Meanwhile
  // sample its thread count.
  siginfo_t info{};
  long peak_threads = 0;
  for (;;) {
    info.si_pid = 0;
    const int r = waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT | WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || info.si_pid == child) break;
    const long threads = threads_of(child);
    if (threads > peak_threads) peak_threads = threads;
    const timespec pause{0, 5'000'000};
    nanosleep(&pause, nullptr);
  }
  const double wall = now_ms() - t0;
  double self_user = -1, self_sys = -1;
  own_cpu_ms(child, self_user, self_sys);
  int status = 0;
  rusage usage{};
  pid_t got;
  while ((got = wait4(child, &status, 0, &usage)) < 0 && errno == EINTR) {
  }
  alarm(0);
  if (got < 0) {
    std::fprintf(stderr, "run_timed: wait4: %s\n", std::strerror(errno));
    return 125;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (timed_out) {
    std::fprintf(stderr, "run_timed: %s ran past %ld s; killed\n", argv[3], timeout_s);
    code = 124;
  }
  std::fprintf(result, "%.1f %.1f %.1f %ld %d\n%.1f %.1f\n%ld\n", wall, tv_ms(usage.ru_utime),
               tv_ms(usage.ru_stime), usage.ru_maxrss, code, self_user, self_sys, peak_threads);
  std::fclose(result);
  return code;
}

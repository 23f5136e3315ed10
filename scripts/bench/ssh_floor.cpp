// ssh_floor — the bare parallel-ssh floor of scripts/bench.sh.
//
// Opens one libssh session per host, each on its own thread, all at once: TCP connect, key exchange,
// public-key authentication, one exec channel running COMMAND (default `true`), read until EOF, exit
// status, close. Then waits for all and prints the wall time from before the first thread started to
// after the last session closed, and this process's own CPU time. No host-key checking, no
// ~/.ssh/config: the least work a launcher that starts something on every host over SSH can do, so
// what a launcher takes above it is its own.
//
//   ssh_floor [-p PORT] [-i KEY] [-l USER] [-c COMMAND] [-t TIMEOUT_S] HOST...
//
// Output (one line, key=value, for scripts): wall_ms=... cpu_ms=... sessions=N ok=K
// slowest_connect_ms=... slowest_auth_ms=... slowest_exec_ms=...
// Exit status: 0 when every session ran COMMAND and it exited 0; 1 otherwise (each failure on stderr);
// 2 on a bad command line.
//
// Build: g++ -std=c++20 -O2 -pthread ssh_floor.cpp -o ssh_floor -lssh
#include <libssh/libssh.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 22;
  std::string key;
  std::string user;
  std::string command = "true";
  long timeout_s = 30;
  std::vector<std::string> hosts;
};

struct Outcome {
  bool ok = false;
  std::string error;
  double connect_ms = 0;  // TCP connect + key exchange
  double auth_ms = 0;     // public-key authentication
  double exec_ms = 0;     // channel open, exec, output until EOF, exit status
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "ssh_floor: %s\nusage: ssh_floor [-p PORT] [-i KEY] [-l USER] [-c COMMAND] [-t TIMEOUT_S] HOST...\n",
               why);
  std::exit(2);
}

long number(const char* text, const char* what, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "ssh_floor: bad %s '%s'\n", what, text);
    std::exit(2);
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "-p") {
      o.port = static_cast<int>(number(value(), "port", 1, 65535));
    } else if (a == "-i") {
      o.key = value();
    } else if (a == "-l") {
      o.user = value();
    } else if (a == "-c") {
      o.command = value();
    } else if (a == "-t") {
      o.timeout_s = number(value(), "timeout", 1, 3600);
    } else if (a == "-h" || a == "--help") {
      usage("opens one SSH session per host in parallel and runs COMMAND on each");
    } else if (!a.empty() && a[0] == '-') {
      usage(("unknown option " + a).c_str());
    } else {
      o.hosts.push_back(a);
    }
  }
  if (o.hosts.empty()) usage("no hosts");
  return o;
}

std::string session_error(ssh_session s, const char* step) {
  return std::string(step) + ": " + ssh_get_error(s);
}

// One host: everything a launcher must do to run COMMAND there. `key` is shared read-only.
Outcome run_one(const Options& o, const std::string& host, ssh_key key) {
  Outcome out;
  ssh_session s = ssh_new();
  if (s == nullptr) {
    out.error = "ssh_new failed";
    return out;
  }
  const int no = 0;
  const long timeout = o.timeout_s;
  ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no);  // no ~/.ssh/config
  ssh_options_set(s, SSH_OPTIONS_HOST, host.c_str());
  ssh_options_set(s, SSH_OPTIONS_PORT, &o.port);
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout);
  if (!o.user.empty()) ssh_options_set(s, SSH_OPTIONS_USER, o.user.c_str());

  const auto t0 = Clock::now();
  if (ssh_connect(s) != SSH_OK) {
    out.error = session_error(s, "connect");
    ssh_free(s);
    return out;
  }
  const auto t1 = Clock::now();
  const int auth = key != nullptr ? ssh_userauth_publickey(s, nullptr, key) : ssh_userauth_publickey_auto(s, nullptr, nullptr);
  const auto t2 = Clock::now();
  if (auth != SSH_AUTH_SUCCESS) {
    out.error = session_error(s, "authentication");
  } else if (ssh_channel c = ssh_channel_new(s); c == nullptr) {
    out.error = session_error(s, "ssh_channel_new");
  } else {
    if (ssh_channel_open_session(c) != SSH_OK) {
      out.error = session_error(s, "channel open");
    } else if (ssh_channel_request_exec(c, o.command.c_str()) != SSH_OK) {
      out.error = session_error(s, "exec");
    } else {
      char buf[4096];
      const auto give_up = Clock::now() + std::chrono::seconds(timeout);
      for (;;) {  // drain stdout and stderr until EOF (returns as soon as data or EOF arrives)
        const int n = ssh_channel_read_timeout(c, buf, sizeof buf, 0, 1000);
        const int m = ssh_channel_read_nonblocking(c, buf, sizeof buf, 1);
        if (n == SSH_ERROR || m == SSH_ERROR) {
          out.error = session_error(s, "read");
          break;
        }
        if (ssh_channel_is_eof(c)) break;
        if (Clock::now() > give_up) {
          out.error = "no EOF within " + std::to_string(timeout) + " s";
          break;
        }
      }
      ssh_channel_send_eof(c);
      const int status = ssh_channel_get_exit_status(c);
      if (out.error.empty()) {
        if (status == 0) {
          out.ok = true;
        } else {
          out.error = "'" + o.command + "' exited with " + std::to_string(status);
        }
      }
    }
    ssh_channel_close(c);
    ssh_channel_free(c);
  }
  const auto t3 = Clock::now();
  ssh_disconnect(s);
  ssh_free(s);
  out.connect_ms = ms_between(t0, t1);
  out.auth_ms = ms_between(t1, t2);
  out.exec_ms = ms_between(t2, t3);
  return out;
}

double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (ssh_init() != SSH_OK) {
    std::fprintf(stderr, "ssh_floor: ssh_init failed\n");
    return 1;
  }
  const auto t0 = Clock::now();
  ssh_key key = nullptr;
  if (!o.key.empty() && ssh_pki_import_privkey_file(o.key.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
    std::fprintf(stderr, "ssh_floor: cannot read the private key %s\n", o.key.c_str());
    return 2;
  }
  std::vector<Outcome> outcomes(o.hosts.size());
  std::vector<std::thread> threads;
  threads.reserve(o.hosts.size());
  for (std::size_t i = 0; i < o.hosts.size(); ++i)
    threads.emplace_back([&, i] { outcomes[i] = run_one(o, o.hosts[i], key); });
  for (auto& t : threads) t.join();
  const double wall = ms_between(t0, Clock::now());
  ssh_key_free(key);

  int ok = 0;
  double slow_connect = 0, slow_auth = 0, slow_exec = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& r = outcomes[i];
    if (r.ok) {
      ++ok;
    } else {
      std::fprintf(stderr, "ssh_floor: %s: %s\n", o.hosts[i].c_str(), r.error.c_str());
    }
    slow_connect = std::max(slow_connect, r.connect_ms);
    slow_auth = std::max(slow_auth, r.auth_ms);
    slow_exec = std::max(slow_exec, r.exec_ms);
  }
  std::printf("wall_ms=%.1f cpu_ms=%.1f sessions=%zu ok=%d slowest_connect_ms=%.1f slowest_auth_ms=%.1f "
              "slowest_exec_ms=%.1f\n",
              wall, cpu_ms(), o.hosts.size(), ok, slow_connect, slow_auth, slow_exec);
  ssh_finalize();
  return ok == static_cast<int>(o.hosts.size()) ? 0 : 1;
}

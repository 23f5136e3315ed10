// hvrun-store-bench: how fast the rendezvous store is (set and get rates of one client, the time for N
// ranks to rendezvous, and for N ranks to connect Gloo's full mesh through it), all on loopback in one
// process, ranks as threads. With --serve it instead serves a store, for one command (hvrun ...) or until
// interrupted, for ranks started while hvrun does not serve the store itself.
#include <CLI/CLI.hpp>
#include <spawn.h>
#include <sys/wait.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <algorithm>
#include <barrier>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <exception>
#include <cstdio>
#include <iostream>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/job_secret.hpp"
#include "agent/store_server.hpp"
#include "hvrun/communicator.hpp"
#include "collectives/loopback_ranks.hpp"
#include "collectives/store_client.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A store served by its own thread, as the agent serves it inside its io_context.
class ServedStore {
 public:
  ServedStore(const std::string& bind, std::uint16_t port)
      : token_(hvrun::JobSecret::generate().hex()), server_(io_, token_, bind, port), thread_([this] { io_.run(); }) {}
  ~ServedStore() {
    asio::post(io_, [this] {
      server_.close();
      io_.stop();
    });
    thread_.join();
  }
  hvrun::StoreClientOptions client_options() const {
    hvrun::StoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = server_.port();
    o.token = token_;
    o.timeout = std::chrono::seconds(60);
    return o;
  }
  std::uint16_t port() const { return server_.port(); }
  const std::string& token() const { return token_; }

 private:
  asio::io_context io_;
  std::string token_;
  hvrun::StoreServer server_;
  std::thread thread_;
};

// Runs body(rank) on `ranks` threads released together; returns the wall time from that start to the
// last rank done. The first exception of any rank is rethrown after all threads joined.
template <typename F>
double timed_ranks(int ranks, F body) {
  std::barrier start(ranks + 1);
  std::vector<std::thread> threads;
  std::vector<double> done(static_cast<std::size_t>(ranks));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  Clock::time_point t0;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      start.arrive_and_wait();
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
      done[static_cast<std::size_t>(r)] = seconds_since(t0);
    });
  t0 = Clock::now();
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return *std::max_element(done.begin(), done.end());
}

// Each rank connects its own client, sets its "address" and multi-gets everyone's: the store's part
// of a rendezvous.
double rendezvous(const ServedStore& store, int ranks, int round) {
  return timed_ranks(ranks, [&](int r) {
    hvrun::StoreClient client(store.client_options());
    const std::string prefix = "round" + std::to_string(round) + "/addr/";
    client.set(prefix + std::to_string(r), std::string(200, static_cast<char>('a' + r % 26)));
    std::vector<std::string> keys;
    for (int p = 0; p < ranks; ++p) keys.push_back(prefix + std::to_string(p));
    if (client.multi_get(keys).size() != keys.size()) throw hvrun::Error("rendezvous: wrong number of values");
  });
}

// Each rank makes a Communicator: Gloo's device on lo and its full mesh, connected through the store.
double gloo_mesh(const ServedStore& store, int ranks, int round) {
  std::barrier connected(ranks);
  return timed_ranks(ranks, [&](int r) {
    hvrun::CommunicatorOptions o =
        hvrun::bench::loopback_rank_options(r, ranks, store.client_options(), std::chrono::seconds(60));
    o.store_prefix = "mesh" + std::to_string(round) + "/";
    hvrun::Communicator comm(o);
    connected.arrive_and_wait();  // nobody tears its pairs down while others still connect
  });
}

int bench(int ranks, int ops, int rounds, int gloo_ranks) {
  ServedStore store("127.0.0.1", 0);
  hvrun::StoreClient client(store.client_options());
  const std::string value(32, 'v');
  auto t = Clock::now();
  for (int i = 0; i < ops; ++i) client.set("k" + std::to_string(i), value);
  const double set_s = seconds_since(t);
  t = Clock::now();
  for (int i = 0; i < ops; ++i) client.get("k" + std::to_string(i));
  const double get_s = seconds_since(t);
  t = Clock::now();
  for (int i = 0; i < ops; ++i) client.add("counter", 1);
  const double add_s = seconds_since(t);
  std::printf("store on loopback, one client, %d operations each:\n", ops);
  std::printf("  set  %9.0f ops/s  (%.1f us each)\n", ops / set_s, set_s / ops * 1e6);
  std::printf("  get  %9.0f ops/s  (%.1f us each)\n", ops / get_s, get_s / ops * 1e6);
  std::printf("  add  %9.0f ops/s  (%.1f us each)\n", ops / add_s, add_s / ops * 1e6);

  std::vector<double> times;
  for (int round = 0; round < rounds; ++round) times.push_back(rendezvous(store, ranks, round));
  std::sort(times.begin(), times.end());
  std::printf("rendezvous of %d ranks (threads: connect, authenticate, set own address, get all %d):\n", ranks,
              ranks);
  std::printf("  best %.1f ms, median %.1f ms, worst %.1f ms over %d rounds\n", times.front() * 1e3,
              times[times.size() / 2] * 1e3, times.back() * 1e3, rounds);
  if (gloo_ranks > 0) {
    const double mesh = gloo_mesh(store, gloo_ranks, 0);
    std::printf("Gloo full mesh of %d ranks (threads) through the store on lo: %.1f ms\n", gloo_ranks, mesh * 1e3);
  }
  return 0;
}

// Serves a store until SIGINT/SIGTERM, printing the variables ranks need. A store serves one job:
// keys of a finished job would mislead the next, so prefer the command form below.
int serve(const std::string& bind, std::uint16_t port) {
  asio::io_context io;
  const std::string token = hvrun::JobSecret::generate().hex();
  hvrun::StoreServer server(io, token, bind, port);
  std::printf("HVRUN_STORE_ADDR=%s HVRUN_STORE_PORT=%u HVRUN_STORE_TOKEN=%s\n",
              bind.empty() ? "127.0.0.1" : bind.c_str(), server.port(), token.c_str());
  std::fflush(stdout);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { server.close(); });
  io.run();
  return 0;
}

// Serves a store for the lifetime of one command (usually `hvrun ... -x HVRUN_STORE_ADDR ...`), with
// HVRUN_STORE_* in its environment; returns its exit code (128+N for signal N).
int serve_command(const std::string& bind, std::uint16_t port, const std::vector<std::string>& command) {
  ServedStore store(bind.empty() ? "127.0.0.1" : bind, port);
  ::setenv("HVRUN_STORE_ADDR", bind.empty() ? "127.0.0.1" : bind.c_str(), 1);
  ::setenv("HVRUN_STORE_PORT", std::to_string(store.port()).c_str(), 1);
  ::setenv("HVRUN_STORE_TOKEN", store.token().c_str(), 1);
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (const int err = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); err != 0)
    throw hvrun::SystemError("posix_spawnp", command[0], err);
  int status = 0;
  if (hvrun::retry_eintr([&] { return ::waitpid(pid, &status, 0); }) < 0) hvrun::throw_errno("waitpid", command[0]);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_logger_st("hvrun"));
  spdlog::set_pattern("%v");
  CLI::App app("Rendezvous store benchmark (or, with --serve, a store for hand-run ranks)", "hvrun-store-bench");
  int ranks = 64, ops = 20000, rounds = 5, gloo_ranks = 0;
  bool serve_mode = false;
  std::string bind = "127.0.0.1";
  std::uint16_t port = 0;
  app.add_option("--ranks", ranks, "ranks (threads) in the rendezvous")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--ops", ops, "operations for the set/get/add rates")->capture_default_str()->check(CLI::Range(1, 10000000));
  app.add_option("--rounds", rounds, "rendezvous rounds")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--gloo-ranks", gloo_ranks, "also time a Gloo full mesh of this many ranks (0: skip)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  std::vector<std::string> command;
  app.add_flag("--serve", serve_mode,
               "serve a store: for the command after --, with HVRUN_STORE_* in its environment; without one, "
               "until SIGINT/SIGTERM, printing HVRUN_STORE_*");
  app.add_option("--bind", bind, "with --serve: address to listen on (\"\" = all)")->capture_default_str();
  app.add_option("--port", port, "with --serve: port (0 = any free one)")->capture_default_str();
  app.add_option("command", command, "with --serve: the command to run (after --)");
  // scripts/bench_store.sh passes defaults and then the caller's arguments: the last one wins.
  for (auto* option : app.get_options())
    if (option->nonpositional()) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  CLI11_PARSE(app, argc, argv);
  try {
    if (serve_mode) return command.empty() ? serve(bind, port) : serve_command(bind, port, command);
    if (!command.empty()) throw hvrun::UsageError("a command is for --serve only");
    return bench(ranks, ops, rounds, gloo_ranks);
  } catch (const std::exception& e) {
    std::cerr << "hvrun-store-bench: " << e.what() << "\n";
    return 1;
  }
}

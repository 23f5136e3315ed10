// The agent driven directly over its channel, as a launcher would: hello, job, launch, output,
// exits, terminate, shutdown, a missing working directory, and what it does when the launcher vanishes.
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/proc_scan.hpp"
#include "common/control_message.hpp"
#include "common/frame_codec.hpp"
#include "common/job_secret.hpp"
#include "hvrun/version.hpp"
#include "launcher/start/local_agent.hpp"
#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"

using namespace hvrun;
using namespace std::chrono_literals;

namespace {

class AgentDriver {
 public:
  AgentDriver() : agent_(std::string(hvrun::test::build().bin_dir) + "/hvrun-agent"), fd_(agent_.take_channel()) {}

  void send(const ControlMessage& m) {
    const std::string f = encode_frame(FrameType::kControl, encode_control(m));
    REQUIRE(::write(fd_.get(), f.data(), f.size()) == static_cast<ssize_t>(f.size()));
  }
  // The next frame, or nothing at EOF or after the timeout.
  std::optional<Frame> next(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto f = decoder_.next()) return f;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buf[65536];
      const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  // Skips heartbeats and output; returns the next control message of type T.
  template <typename T>
  T expect(std::string* output = nullptr) {
    for (;;) {
      auto f = next();
      REQUIRE(f);
      if (f->type == FrameType::kOutput) {
        if (output) *output += decode_output(f->payload, "agent").bytes;
        continue;
      }
      auto m = decode_control(f->payload, "agent");
      if (std::holds_alternative<HeartbeatMsg>(m)) continue;
      if (!std::is_same_v<T, ReadyMsg> && std::holds_alternative<ReadyMsg>(m)) continue;
      REQUIRE(std::holds_alternative<T>(m));
      return std::get<T>(m);
    }
  }
  void close() { fd_.reset(); }
  LocalAgent& process() { return agent_; }

 private:
  LocalAgent agent_;
  UniqueFd fd_;
  FrameDecoder decoder_{"agent"};
};

LaunchMsg launch_of(std::vector<std::string> argv, const std::string& marker, int ranks = 1) {
  LaunchMsg m{"/tmp", std::move(argv), {{"PATH", "/usr/bin:/bin"}}, {}};
  const auto eq = marker.find('=');
  for (int r = 0; r < ranks; ++r)
    m.ranks.push_back(RankLaunch{r, {{"HVRUN_RANK", std::to_string(r)}, {marker.substr(0, eq), marker.substr(eq + 1)}}});
  return m;
}

}  // namespace

TEST_CASE("the agent says hello with its version, hostname, interfaces and ports", "[integration][agent]") {
  AgentDriver a;
  const auto hello = a.expect<HelloMsg>();
  CHECK(hello.version == kVersion);
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  CHECK(hello.hostname == name);
  CHECK(hello.free_port > 0);
  CHECK(hello.probe_port > 0);
  bool has_lo = false;
  for (const auto& i : hello.interfaces) has_lo = has_lo || (i.loopback && !i.addresses.empty());
  CHECK(has_lo);
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  CHECK(a.expect<ReadyMsg>().store_port == 0);  // answers probes from now on; no store asked for
}

TEST_CASE("the agent runs ranks, streams their output before their exit, and obeys shutdown", "[integration][agent]") {
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  const std::string marker = test::unique_marker();
  a.send(launch_of({"sh", "-c", "echo out-$HVRUN_RANK; echo err >&2; exit 3"}, marker, 2));
  std::string output;
  int exits = 0;
  for (int started = 0; started + exits < 4;) {
    auto f = a.next();
    REQUIRE(f);
    if (f->type == FrameType::kOutput) {
      output += decode_output(f->payload, "agent").bytes;
      continue;
    }
    auto m = decode_control(f->payload, "agent");
    if (std::holds_alternative<StartedMsg>(m)) ++started;
    CHECK_FALSE(std::holds_alternative<FatalMsg>(m));
    if (auto* e = std::get_if<ExitedMsg>(&m)) {
      CHECK(e->exit_code == 3);
      CHECK_THAT(output, Catch::Contains("out-" + std::to_string(e->rank)));  // output came first
      ++exits;
    }
  }
  a.send(ShutdownMsg{});
  CHECK_FALSE(a.next(5s));  // the agent closes its channel and exits
  CHECK(a.process().reap(5000ms) == 0);
}

TEST_CASE("a missing working directory is a fatal message naming it", "[integration][agent]") {
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  auto m = launch_of({"true"}, test::unique_marker());
  m.cwd = "/nonexistent/hvrun-test-dir";
  a.send(m);
  const auto fatal = a.expect<FatalMsg>();
  CHECK_THAT(fatal.error, Catch::Contains("working directory '/nonexistent/hvrun-test-dir' does not exist"));
}

TEST_CASE("the agent kills its ranks at once when its channel closes", "[integration][agent]") {
  const std::string marker = test::unique_marker();
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  a.send(launch_of({"sh", "-c", "sleep 60 & exec sleep 60"}, marker, 2));
  a.expect<StartedMsg>();
  a.expect<StartedMsg>();
  // Started follows the fork, not the exec: the marker shows in the ranks' environment a moment later.
  REQUIRE(test::wait_for_marker_count(marker, 2, 5s) >= 2);
  a.close();
  CHECK(test::wait_until_gone(marker, 2s).empty());
}

TEST_CASE("an agent that hears nothing for its heartbeat period kills its ranks", "[integration][agent]") {
  const std::string marker = test::unique_marker();
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(JobMsg{JobSecret::generate().hex(), 600, 0});
  a.send(launch_of({"sleep", "60"}, marker));
  a.expect<StartedMsg>();
  // We never send anything again; the agent gives up after 600 ms.
  CHECK(test::wait_until_gone(marker, 3s).empty());
}

TEST_CASE("the agent refuses protocol violations by closing", "[integration][agent]") {
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(launch_of({"true"}, test::unique_marker()));  // a launch before the job message
  CHECK_FALSE(a.next(5s));
}

TEST_CASE("the agent sends at most a window of unacknowledged output, then waits for acks", "[integration][agent]") {
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  const std::string marker = test::unique_marker();
  constexpr std::size_t kTotal = 8u << 20;  // eight windows
  a.send(launch_of({"sh", "-c", "exec head -c " + std::to_string(kTotal) + " /dev/zero"}, marker));
  // Read without acknowledging: the output stops near one window (plus one read of the pipe), and the
  // rank is still alive, blocked in write().
  std::size_t got = 0;
  bool exited = false;
  for (auto f = a.next(2s); f; f = a.next(1s)) {
    if (f->type == FrameType::kOutput) got += decode_output(f->payload, "agent").bytes.size();
    else if (std::holds_alternative<ExitedMsg>(decode_control(f->payload, "agent"))) exited = true;
  }
  CHECK(got >= kOutputWindow);
  CHECK(got <= kOutputWindow + (64u << 10));
  CHECK_FALSE(exited);
  CHECK(test::processes_with_marker(marker).size() == 1);
  // Acknowledging what came lets the rest through, and the rank finishes.
  std::size_t acked = 0;
  while (!exited) {
    if (got > acked) {
      a.send(OutputAckMsg{static_cast<int>(got - acked)});
      acked = got;
    }
    auto f = a.next(10s);
    REQUIRE(f);
    if (f->type == FrameType::kOutput) got += decode_output(f->payload, "agent").bytes.size();
    else if (auto m = decode_control(f->payload, "agent"); auto* e = std::get_if<ExitedMsg>(&m)) {
      CHECK(e->exit_code == 0);
      exited = true;
    }
  }
  CHECK(got == kTotal);
  // Acknowledging more than was sent is a protocol violation: the agent closes.
  a.send(OutputAckMsg{static_cast<int>(kOutputWindow)});
  for (auto f = a.next(5s); f; f = a.next(5s)) {
  }
  CHECK(test::wait_until_gone(marker, 2s).empty());
}

TEST_CASE("a slow interpreter holds up only its fingerprint, and ranks reaped meanwhile leave it its own exit status",
          "[integration][agent]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hvrun-slow-python-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{dir};
  // An interpreter that answers after 2 s, with exit code 0: the fingerprint has its version only if the
  // agent's handle on it, not the reaping of the rank, took its exit status.
  std::ofstream(dir / "python3") << "#!/bin/sh\nsleep 2\necho 3.99.1\necho /nonexistent/site\n";
  std::ofstream(dir / "train.py") << "print('trained')\n";
  fs::permissions(dir / "python3", fs::perms::owner_all);
  AgentDriver a;
  a.expect<HelloMsg>();
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  const auto sent = std::chrono::steady_clock::now();
  a.send(FingerprintRequestMsg{{(dir / "python3").string(), "train.py"}, dir.string(), {{"PATH", "/usr/bin:/bin"}}});
  a.send(launch_of({"sh", "-c", "exit 4"}, test::unique_marker()));
  std::optional<ExitedMsg> exited;
  std::optional<FingerprintMsg> fingerprint;
  while (!fingerprint) {
    auto f = a.next();
    REQUIRE(f);
    if (f->type != FrameType::kControl) continue;
    auto m = decode_control(f->payload, "agent");
    CHECK_FALSE(std::holds_alternative<FatalMsg>(m));
    if (auto* e = std::get_if<ExitedMsg>(&m)) {
      CHECK(std::chrono::steady_clock::now() - sent < 1500ms);  // the loop went on during the interpreter's run
      exited = *e;
    }
    if (auto* fp = std::get_if<FingerprintMsg>(&m)) fingerprint = *fp;
  }
  REQUIRE(exited);  // before the fingerprint
  CHECK(exited->exit_code == 4);
  CHECK(exited->peak_rss_kb > 0);  // wait4 through the rank's handle, as before
  CHECK(fingerprint->python == "3.99.1");
  CHECK(fingerprint->script == (dir / "train.py").string());
  CHECK(std::chrono::steady_clock::now() - sent >= 2s);
  a.send(ShutdownMsg{});
  CHECK_FALSE(a.next(5s));
  CHECK(a.process().reap(5000ms) == 0);
}

TEST_CASE("what a rank leaves behind when it exits is reaped by the agent, its subreaper", "[integration][agent]") {
  AgentDriver a;
  const pid_t agent = a.expect<HelloMsg>().pid;
  a.send(JobMsg{JobSecret::generate().hex(), 20000, 0});
  // The subshell outlives the rank: the agent adopts it, and reaps it when it ends 0.5 s later.
  a.send(launch_of({"sh", "-c", "(sleep 0.5; exit 7) & exit 0"}, test::unique_marker()));
  a.expect<StartedMsg>();
  CHECK(a.expect<ExitedMsg>().exit_code == 0);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!children_of(agent).empty() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  CHECK(children_of(agent).empty());  // no zombie left
  a.send(ShutdownMsg{});
  CHECK_FALSE(a.next(5s));
}

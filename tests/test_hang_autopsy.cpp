// The pieces of crash and hang reports without a lab: the stack groups' wording, the stall rule, the
// teardown's autopsy phase, the OOM record's words and who sent a SIGKILL, the crash handler's
// preload environment, and the agent's stack collection on real local processes (the preloaded
// library answering, a process without it described from /proc).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/file.h>
#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/crash_text_filter.hpp"
#include "agent/kernel_log.hpp"
#include "agent/proc_scan.hpp"
#include "agent/rank_table.hpp"
#include "agent/rank_tools.hpp"
#include "agent/stack_collector.hpp"
#include "common/crash_report.hpp"
#include "common/unique_fd.hpp"
#include "launcher/base/exit_codes.hpp"
#include "launcher/job/stack_groups.hpp"
#include "launcher/job/stall_watch.hpp"
#include "launcher/job/teardown.hpp"
#include "launcher/output/stderr_digest.hpp"
#include "tests/support/build_paths.hpp"
#include "tests/support/preloaded_process.hpp"

using namespace std::chrono_literals;

namespace {

std::string python_stack(const std::string& inner, int line) {
  return "hvrun-stack: pid 10 (python3)\npython:\n"
         "Thread 0x00007f1 (most recent call first):\n  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n\n"
         "Current thread 0x00007f2 (most recent call first):\n"
         "  File \"/w/lib.py\", line " + std::to_string(line) + " in " + inner + "\n"
         "  File \"/w/train.py\", line 41 in step\n  File \"/w/train.py\", line 50 in <module>\n"
         "native:\n  #0 0x7f clock_nanosleep+0x65 (/lib/libc.so.6)\n";
}

}  // namespace

TEST_CASE("stack groups: ranks in one place are one line; the odd rank stands alone", "[autopsy]") {
  std::vector<hvrun::RankStackText> s;
  for (int r : {0, 1, 3}) s.push_back({r, r < 2 ? "lab0" : "lab1", python_stack("allreduce", 7)});
  s.push_back({2, "lab1", python_stack("wait_for_shard", 19)});
  const std::string text = hvrun::stack_groups_report(s, 8, 2);
  CHECK(text ==
        "hvrun: ranks 0,1,3 on lab0, lab1: in allreduce at lib.py:7 \u2190 step at train.py:41 \u2190 <module> at train.py:50\n"
        "hvrun:       File \"/w/lib.py\", line 7 in allreduce\n"
        "hvrun:       File \"/w/train.py\", line 41 in step\n"
        "hvrun:     ... 1 more frames\n"
        "hvrun: rank 2 on lab1: in wait_for_shard at lib.py:19 \u2190 step at train.py:41 \u2190 <module> at train.py:50\n"
        "hvrun:       File \"/w/lib.py\", line 19 in wait_for_shard\n"
        "hvrun:       File \"/w/train.py\", line 41 in step\n"
        "hvrun:     ... 1 more frames");
}

TEST_CASE("stack groups: native frames without Python, the kernel's word without a handler, bounds", "[autopsy]") {
  const std::string native =
      "hvrun-stack: pid 11 (hang)\nnative:\n  #0 0x1 nanosleep+0x5 (/lib/libc.so.6)\n"
      "  #1 0x2 _ZN4gloo7Context4sizeEv+0x5 (/x/libgloo.so)\n  #2 0x3 ?? +0x10 (/x/hang)\n"
      "hvrun-stack: pid 12 (child)\nnative:\n  #0 0x1 read+0x5 (/lib/libc.so.6)\n";
  const hvrun::StackPlace p = hvrun::stack_place(native);
  CHECK(p.frames == std::vector<std::string>{"nanosleep", "gloo::Context::size()", "?? in hang"});
  const std::string kernel = "hvrun-stack: pid 13 (static) gave no stack (...); the kernel says:\n"
                             "  state S, waiting in hrtimer_nanosleep\n  kernel: do_nanosleep+0x6b/0x1a0\n";
  const hvrun::StackPlace k = hvrun::stack_place(kernel);
  CHECK(k.frames == std::vector<std::string>{"kernel wait hrtimer_nanosleep", "kernel: do_nanosleep+0x6b/0x1a0"});

  std::vector<hvrun::RankStackText> many;
  for (int r = 0; r < 12; ++r) many.push_back({r, "h" + std::to_string(r), python_stack("f" + std::to_string(r), r)});
  const std::string text = hvrun::stack_groups_report(many, 3, 1);
  CHECK(text.find("rank 3 ") == std::string::npos);
  CHECK(text.substr(text.rfind('\n') + 1) == "hvrun: ... and 9 more groups of ranks");
  CHECK(hvrun::rank_list({7, 0, 1, 2, 3, 5}) == "0-3,5,7");
  CHECK(hvrun::rank_list({4, 5}) == "4,5");
}

TEST_CASE("stall watch: output and busy CPU are activity; a few per cent of a core is not", "[autopsy]") {
  using Clock = hvrun::StallWatch::Clock;
  const auto t0 = Clock::now();
  hvrun::StallWatch off(0ms, 1000ms);
  CHECK_FALSE(off.stalled(t0 + 1h));
  hvrun::StallWatch w(3000ms, 1000ms);
  w.start(t0);
  CHECK_FALSE(w.stalled(t0 + 2999ms));
  CHECK(w.stalled(t0 + 3000ms));
  w.heartbeat(2, 150, t0 + 2000ms);  // 7.5 % per rank: idle polling
  CHECK(w.stalled(t0 + 3000ms));
  w.heartbeat(2, 250, t0 + 2500ms);  // 12.5 % per rank: computing
  CHECK_FALSE(w.stalled(t0 + 5000ms));
  CHECK(w.until_stalled(t0 + 5000ms) == 500ms);
  w.output(t0 + 5400ms);
  CHECK_FALSE(w.stalled(t0 + 8000ms));
  CHECK(w.stalled(t0 + 8400ms));
}

TEST_CASE("teardown: the first signal while ranks run starts the autopsy, a second stops at once", "[autopsy]") {
  using T = hvrun::Teardown;
  T t(3000ms);
  t.advance(T::Phase::kRunning);
  const auto first = t.on_signal(SIGINT);
  CHECK(first.report);
  CHECK(first.action == T::Action::kAutopsy);
  CHECK(first.grace == 3000ms);
  CHECK(t.exit_code() == 128 + SIGINT);
  CHECK(t.begin_autopsy());
  CHECK(t.phase() == T::Phase::kAutopsy);
  CHECK(t.activity() == "collecting the ranks' stacks");
  const auto second = t.on_signal(SIGINT);
  CHECK_FALSE(second.report);
  CHECK(second.action == T::Action::kStopRanks);
  CHECK(second.grace == 0ms);
  CHECK(t.stop_ranks());

  T stall(2000ms);
  CHECK(stall.on_stall().action == T::Action::kNothing);  // before the launch: nothing to stall
  stall.advance(T::Phase::kRunning);
  const auto d = stall.on_stall();
  CHECK(d.report);
  CHECK(d.action == T::Action::kAutopsy);
  CHECK(stall.exit_code() == hvrun::kExitLaunchFailed);

  T early(1000ms);
  CHECK(early.on_signal(SIGTERM).action == T::Action::kShutDown);  // no rank yet: no stacks to take
}

TEST_CASE("death causes: the OOM killer's record in words; who sent a SIGKILL", "[autopsy]") {
  CHECK(hvrun::oom_kill_words("Memory cgroup out of memory: Killed process 4883 (python3) total-vm:82228kB, "
                              "anon-rss:65152kB, file-rss:5104kB") ==
        "the kernel's OOM killer (its memory cgroup's limit was reached; anon-rss 65152kB)");
  CHECK(hvrun::oom_kill_words("Out of memory: Killed process 7 (x)") == "the kernel's OOM killer");
  CHECK(hvrun::sigkill_cause(false, std::string("Out of memory: Killed process 7 (x)"), true) ==
        "sent by the kernel's OOM killer");
  CHECK(hvrun::sigkill_cause(true, std::nullopt, true) ==
        "sent by hvrun: the rank had not ended within the kill grace after SIGTERM");
  CHECK(hvrun::sigkill_cause(false, std::nullopt, true).find("not by the OOM killer") != std::string::npos);
  CHECK(hvrun::sigkill_cause(false, std::nullopt, false).find("not readable") != std::string::npos);
  CHECK(hvrun::sigkill_cause(false, std::nullopt, false, true, "/job_42/step_0") ==
        "sent by the kernel's OOM killer (its memory cgroup /job_42/step_0 counted an OOM kill)");
  CHECK(hvrun::sigkill_cause(false, std::nullopt, false, false, "/job_42/step_0") ==
        "sent from outside hvrun (not by the OOM killer: its memory cgroup /job_42/step_0 counted no OOM kill)");
  // This process's own cgroup, where one is there to read (v1's memory hierarchy or v2 with memory).
  if (const auto own = hvrun::own_cgroup_oom_kills()) {
    CHECK_FALSE(own->cgroup.empty());
    CHECK(own->kills >= 0);
  }
}

TEST_CASE("rank tools: the crash handler is preloaded before the user's, and off on request", "[autopsy]") {
  std::string dir;
  {
    hvrun::RankTools tools;
    dir = std::filesystem::path(tools.library()).parent_path();
    CHECK(std::filesystem::file_size(tools.library()) > 1000);
    CHECK(std::filesystem::is_directory(tools.stack_dir()));
    CHECK((std::filesystem::status(dir).permissions() & std::filesystem::perms::others_all) ==
          std::filesystem::perms::none);
    const auto env = tools.equip({"PATH=/bin", "LD_PRELOAD=/u/libmine.so"});
    CHECK(std::find(env.begin(), env.end(), "LD_PRELOAD=" + tools.library() + ":/u/libmine.so") != env.end());
    CHECK(std::find(env.begin(), env.end(), "HVRUN_STACK_DIR=" + tools.stack_dir()) != env.end());
    const auto plain = tools.equip({"PATH=/bin"});
    CHECK(std::find(plain.begin(), plain.end(), "LD_PRELOAD=" + tools.library()) != plain.end());
    const std::vector<std::string> off{"PATH=/bin", "HVRUN_CRASH_HANDLER=0"};
    CHECK(tools.equip(off) == off);
  }
  CHECK_FALSE(std::filesystem::exists(dir));  // removed with what it held
}

TEST_CASE("rank tools: $TMPDIR when set, else /dev/shm when ranks can map a library from it, else /tmp",
          "[autopsy]") {
  namespace fs = std::filesystem;
  const char* env = std::getenv("TMPDIR");
  const std::optional<std::string> saved = env != nullptr ? std::optional<std::string>(env) : std::nullopt;
  struct Restore {
    const std::optional<std::string>& saved;
    ~Restore() {
      if (saved)
        ::setenv("TMPDIR", saved->c_str(), 1);
      else
        ::unsetenv("TMPDIR");
    }
  } restore{saved};
  ::setenv("TMPDIR", "/var/tmp", 1);
  CHECK(hvrun::RankTools::base_directory() == "/var/tmp");
  ::unsetenv("TMPDIR");
  const std::string base = hvrun::RankTools::base_directory();
  // /proc/self/mountinfo says what /dev/shm is here: a tmpfs without noexec is chosen.
  bool shm_exec_tmpfs = false;
  std::ifstream mounts("/proc/self/mountinfo");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream f(line);
    std::string id, parent, devno, root, point, options;
    f >> id >> parent >> devno >> root >> point >> options;
    if (point != "/dev/shm") continue;
    const auto dash = line.find(" - ");
    const bool tmpfs = dash != std::string::npos && line.compare(dash + 3, 6, "tmpfs ") == 0;
    shm_exec_tmpfs = tmpfs && ("," + options + ",").find(",noexec,") == std::string::npos &&
                     ("," + options + ",").find(",ro,") == std::string::npos;
  }
  CHECK(base == (shm_exec_tmpfs && ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"));
  hvrun::RankTools tools;
  CHECK(fs::path(tools.library()).parent_path().parent_path() == base);
}

TEST_CASE("rank tools: a killed agent's directory is removed by the next agent, a live one's is kept", "[autopsy]") {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / "hvrun-tmpdir-XXXXXX").string();
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  const fs::path tmp = pattern;
  // TMPDIR and the folder are put back even when a REQUIRE below ends the case.
  struct Restore {
    fs::path tmp;
    std::optional<std::string> saved;
    ~Restore() {
      if (saved)
        ::setenv("TMPDIR", saved->c_str(), 1);
      else
        ::unsetenv("TMPDIR");
      std::error_code ignored;
      fs::remove_all(tmp, ignored);
    }
  } restore{tmp, std::getenv("TMPDIR") != nullptr ? std::optional<std::string>(std::getenv("TMPDIR")) : std::nullopt};
  ::setenv("TMPDIR", tmp.c_str(), 1);
  // What SIGKILL leaves: the directory and its lock file, whose flock died with the agent.
  fs::create_directories(tmp / "hvrun-agent.killed1" / "stacks");
  std::ofstream(tmp / "hvrun-agent.killed1" / "lock").put('\n');
  // A live agent's: its lock is held (here by another open file description of this process).
  fs::create_directories(tmp / "hvrun-agent.alive1");
  std::ofstream(tmp / "hvrun-agent.alive1" / "lock").put('\n');
  const hvrun::UniqueFd held(::open((tmp / "hvrun-agent.alive1" / "lock").c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(held);
  REQUIRE(::flock(held.get(), LOCK_EX) == 0);
  // One without a lock file: an agent between mkdtemp and its lock, or an older agent's.
  fs::create_directories(tmp / "hvrun-agent.nolock");
  fs::create_directories(tmp / "unrelated.dir");
  std::string mine;
  {
    hvrun::RankTools tools;
    mine = fs::path(tools.library()).parent_path();
    CHECK_FALSE(fs::exists(tmp / "hvrun-agent.killed1"));
    CHECK(fs::exists(tmp / "hvrun-agent.alive1"));
    CHECK(fs::exists(tmp / "hvrun-agent.nolock"));
    CHECK(fs::exists(tmp / "unrelated.dir"));
    CHECK(fs::exists(fs::path(mine) / "lock"));
    // Its own directory is never another agent's orphan while it lives.
    hvrun::RankTools second;
    CHECK(fs::exists(mine));
  }
  CHECK_FALSE(fs::exists(mine));
}

TEST_CASE("stack collector: a preloaded process answers and goes on; one without is described from /proc",
          "[autopsy]") {
  hvrun::RankTools tools;
  auto start = [&](bool preload) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setpgid(0, 0);
      if (preload) {
        ::setenv("LD_PRELOAD", tools.library().c_str(), 1);
        ::setenv("HVRUN_STACK_DIR", tools.stack_dir().c_str(), 1);
      }
      ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    return pid;
  };
  const pid_t with = start(true);
  const pid_t without = start(false);
  // Until the library's constructor has run, a SIGURG is ignored: wait for the exec.
  for (int i = 0; i < 100; ++i) {
    const auto a = hvrun::read_proc_stat(with), b = hvrun::read_proc_stat(without);
    if (a && b && a->comm == "sleep" && b->comm == "sleep") break;
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(100ms);
  boost::asio::io_context io;
  hvrun::StackCollector collector(io, tools.stack_dir());
  std::optional<hvrun::StacksMsg> got;
  const auto t0 = std::chrono::steady_clock::now();
  collector.collect({{0, with}, {1, without}}, 400ms, [&](hvrun::StacksMsg m) { got = std::move(m); });
  io.run();
  REQUIRE(got);
  REQUIRE(got->ranks.size() == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(got->ranks[0].rank == 0);
  CHECK(got->ranks[0].text.rfind("hvrun-stack: pid " + std::to_string(with) + " (sleep)\nnative:\n  #0 ", 0) == 0);
  CHECK(got->ranks[0].text.find("nanosleep") != std::string::npos);
  CHECK(got->ranks[1].text.find("gave no stack") != std::string::npos);
  CHECK(got->ranks[1].text.find("  state S") != std::string::npos);
  // Both still run: the request does not end a process.
  int status = 0;
  CHECK(::waitpid(with, &status, WNOHANG) == 0);
  CHECK(::waitpid(without, &status, WNOHANG) == 0);
  for (const pid_t p : {with, without}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, &status, 0);
  }
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Whether `frames` hold `sequence` one after another.
bool holds_in_order(const std::vector<std::string>& frames, const std::vector<std::string>& sequence) {
  return std::search(frames.begin(), frames.end(), sequence.begin(), sequence.end()) != frames.end();
}

}  // namespace

TEST_CASE("stack collector: a process stopped inside dlopen or inside malloc answers with its own frames",
          "[autopsy]") {
  hvrun::RankTools tools;
  // Its helper thread holds the loader's lock, in a library constructor that never ends; its main
  // thread waits in wait_here.
  hvrun::test::PreloadedProcess loader({hvrun::test::build().stuck_in_loader, hvrun::test::build().waiting_constructor}, tools);
  // Its main thread waits inside malloc for the heap's lock, which a helper holds.
  hvrun::test::PreloadedProcess in_malloc({hvrun::test::build().stuck_in_malloc, "hang"}, tools);
  REQUIRE(loader.read_until("ready\n", 10s));
  REQUIRE(in_malloc.read_until("ready\n", 10s));
  std::this_thread::sleep_for(100ms);  // from "ready" into pause() and into malloc
  boost::asio::io_context io;
  hvrun::StackCollector collector(io, tools.stack_dir());
  std::optional<hvrun::StacksMsg> got;
  const auto t0 = std::chrono::steady_clock::now();
  collector.collect({{0, loader.pid}, {1, in_malloc.pid}}, 3000ms, [&](hvrun::StacksMsg m) { got = std::move(m); });
  io.run();
  REQUIRE(got);
  REQUIRE(got->ranks.size() == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);  // both answered; none waited for the deadline
  const std::string& in_loader_text = got->ranks[0].text;
  const std::string& in_malloc_text = got->ranks[1].text;
  INFO(in_loader_text << in_malloc_text);
  CHECK(in_loader_text.find("gave no stack") == std::string::npos);
  CHECK(in_malloc_text.find("gave no stack") == std::string::npos);
  CHECK(holds_in_order(hvrun::stack_place(in_loader_text).frames, {"wait_here", "main"}));
  CHECK(holds_in_order(hvrun::stack_place(in_malloc_text).frames, {"malloc", "allocate_here", "main"}));
  CHECK_THAT(in_loader_text, Catch::Contains(" wait_here+0x") && Catch::Contains(std::string("(") + hvrun::test::build().stuck_in_loader + ")"));
  CHECK(in_malloc_text.find(hvrun::crash_report::kFrameOffset) == std::string::npos);  // every frame named
}

TEST_CASE("crash handler: a crash inside malloc, the heap's lock held, still writes its stack, which the agent names",
          "[autopsy]") {
  hvrun::RankTools tools;
  hvrun::test::PreloadedProcess crash({hvrun::test::build().stuck_in_malloc, "crash"}, tools);
  crash.read_until("", 10s);  // to the end of both pipes
  const int status = crash.wait_status();
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  const std::string& raw = crash.err_text;
  INFO(raw);
  CHECK_THAT(raw, Catch::Contains("hvrun-crash: pid ") && Catch::Contains(" SIGABRT, native stack of thread ") &&
                      Catch::Contains("\nhvrun-crash: end of stack\n"));
  // The frames as the handler writes them: places in files, named on the agent's side, here read a
  // few bytes at a time as pipe reads may come.
  CHECK_THAT(raw, Catch::Contains(std::string(hvrun::crash_report::kFrameOffset) + "0x"));
  hvrun::CrashTextFilter filter;
  std::string named;
  for (std::size_t i = 0; i < raw.size(); i += 5) named += filter.feed(std::string_view(raw).substr(i, 5));
  named += filter.flush();
  INFO(named);
  CHECK(named.find(hvrun::crash_report::kFrameOffset) == std::string::npos);
  CHECK_THAT(named, Catch::Contains(" malloc+0x") && Catch::Contains(" allocate_here+0x") &&
                        Catch::Contains(" main+0x") && Catch::Contains(std::string("(") + hvrun::test::build().stuck_in_malloc + ")"));
  // What the launcher then reads of it: the whole report.
  hvrun::StderrDigest digest;
  for (const auto& line : lines_of(named)) digest.line(line);
  const auto report = digest.crash_report();
  REQUIRE(report.size() > 4);
  CHECK(report.front().rfind("hvrun-crash: pid ", 0) == 0);
  CHECK(report.back() == hvrun::crash_report::kCrashFooter);
}

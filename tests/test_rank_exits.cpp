// Rank-exit accounting (launcher/job/rank_exits.hpp): which host runs which rank, exits reported once,
// ranks gone with their agent, and the failure report's text.
#include <catch2/catch.hpp>

#include <signal.h>

#include "launcher/job/job.hpp"
#include "launcher/job/rank_exits.hpp"

using hvrun::ExitedMsg;
using hvrun::RankExits;

TEST_CASE("rank exits: hosts own their ranks, each exit counts once, a lost host ends its ranks",
          "[rank_exits]") {
  RankExits e(5);
  e.assign(0, 0, 2);
  e.assign(1, 2, 3);
  CHECK(e.size() == 5);
  CHECK(e.host_of(0) == 0);
  CHECK(e.host_of(4) == 1);
  CHECK(e.runs_on(1, 0));
  CHECK_FALSE(e.runs_on(2, 0));
  CHECK_FALSE(e.runs_on(-1, 0));
  CHECK_FALSE(e.runs_on(5, 1));
  CHECK(e.record(3));
  CHECK_FALSE(e.record(3));
  CHECK(e.exited() == 1);
  CHECK(e.running() == 4);
  CHECK(e.hosts_running() == std::vector<std::size_t>{0, 1});
  e.mark_host_exited(1);  // rank 3 already counted
  CHECK(e.exited() == 3);
  CHECK_FALSE(e.all_exited());
  CHECK(e.hosts_running() == std::vector<std::size_t>{0});
  e.mark_host_exited(0);
  CHECK(e.all_exited());
  CHECK(e.hosts_running().empty());
  e.mark_host_exited(0);
  CHECK(e.exited() == 5);
}

TEST_CASE("rank exits: how a failed rank's end reads", "[rank_exits]") {
  const ExitedMsg code{2, 3, 0, "", "", 0};
  const ExitedMsg killed{2, 137, SIGKILL, "", "", 0};
  const ExitedMsg spawn{2, 127, 0, "cannot execute 'nope': No such file or directory", "", 0};
  const ExitedMsg ok{2, 0, 0, "", "", 0};
  CHECK(hvrun::describe_exit(code) == "exited with code 3");
  CHECK(hvrun::describe_exit(killed) == "killed by SIGKILL");
  CHECK(hvrun::describe_exit(spawn) == spawn.error);
  CHECK_FALSE(hvrun::exit_failed(ok));
  CHECK(hvrun::exit_failed(code));
  CHECK(hvrun::exit_failed(killed));
  CHECK(hvrun::exit_failed(spawn));
  CHECK(hvrun::failed_rank_exit_code(code) == 3);
  CHECK(hvrun::failed_rank_exit_code(spawn) == hvrun::kExitCannotExecute);

  const hvrun::StderrDigest none;
  const std::deque<std::string> tail{"Traceback", "ValueError: bad"};
  CHECK(hvrun::rank_failure_report(code, "lab2", none, tail, 3) ==
        "hvrun: rank 2 on lab2: exited with code 3; its last stderr lines:\n    Traceback\n    ValueError: bad\n"
        "hvrun: stopping the other 3 ranks");
  CHECK(hvrun::rank_failure_report(spawn, "lab2", none, tail, 0) == "hvrun: rank 2 on lab2: " + spawn.error);
  CHECK(hvrun::rank_failure_report(killed, "lab2", none, {}, 1) ==
        "hvrun: rank 2 on lab2: killed by SIGKILL\nhvrun: stopping the other 1 ranks");
}

TEST_CASE("rank exits: the cause of a SIGKILL and the peak RSS of an OOM kill", "[rank_exits]") {
  ExitedMsg oom{1, 137, SIGKILL, "", "sent by the kernel's OOM killer (anon-rss 65152kB)", 70256};
  CHECK(hvrun::describe_exit(oom) ==
        "killed by SIGKILL, sent by the kernel's OOM killer (anon-rss 65152kB); peak RSS 69 MiB");
  const ExitedMsg outside{1, 137, SIGKILL, "", "sent from outside hvrun (not by the OOM killer: ...)", 5000};
  CHECK(hvrun::describe_exit(outside) == "killed by SIGKILL, sent from outside hvrun (not by the OOM killer: ...)");
}

TEST_CASE("rank exits: a crash report is quoted whole, with the fault address; a traceback's exception is the cause",
          "[rank_exits]") {
  hvrun::StderrDigest d;
  for (const char* line : {"about to crash", "Fatal Python error: Segmentation fault", "",
                           "Current thread 0x00007f (most recent call first):",
                           "  File \"/w/train.py\", line 3 in poison_batch",
                           "hvrun-crash: pid 9 (python3) SIGSEGV, fault address 0x0, native stack of thread 9:",
                           "  #0 0x1 _ZN4gloo7Context4sizeEv+0x5 (/lib/libgloo.so)",
                           "hvrun-crash: end of stack", "after the crash"})
    d.line(line);
  const ExitedMsg segv{3, 139, SIGSEGV, "", "", 0};
  CHECK(hvrun::rank_failure_report(segv, "lab1", d, {"after the crash"}, 0) ==
        "hvrun: rank 3 on lab1: killed by SIGSEGV at address 0x0; its last stderr lines:\n"
        "    about to crash\n"
        "    Fatal Python error: Segmentation fault\n    \n"
        "    Current thread 0x00007f (most recent call first):\n"
        "      File \"/w/train.py\", line 3 in poison_batch\n"
        "    hvrun-crash: pid 9 (python3) SIGSEGV, fault address 0x0, native stack of thread 9:\n"
        "      #0 0x1 gloo::Context::size()+0x5 (/lib/libgloo.so)\n"
        "    hvrun-crash: end of stack");

  hvrun::StderrDigest t;
  for (const char* line : {"Traceback (most recent call last):", "  File \"t.py\", line 1, in <module>",
                           "    raise KeyError('x')", "KeyError: 'x'", "", "During handling of the above exception, another exception occurred:",
                           "", "Traceback (most recent call last):", "  File \"t.py\", line 3, in <module>",
                           "    raise ValueError('bad shard 7')", "    ^^^^^^^^^", "ValueError: bad shard 7"})
    t.line(line);
  CHECK(t.exception() == "ValueError: bad shard 7");
  const ExitedMsg one{2, 1, 0, "", "", 0};
  CHECK(hvrun::rank_failure_report(one, "lab2", t, {"ValueError: bad shard 7"}, 0) ==
        "hvrun: rank 2 on lab2: exited with code 1: ValueError: bad shard 7; its last stderr lines:\n"
        "    ValueError: bad shard 7");
}

TEST_CASE("stderr digest: a native report alone, a bounded report, a new crash replaces the old", "[rank_exits]") {
  hvrun::StderrDigest d;
  d.line("hvrun-crash: pid 5 (crash) SIGSEGV, fault address 0x10, native stack of thread 5:");
  d.line("  #0 0x5 poison_pointer+0xc (/tmp/crash)");
  d.line("hvrun-crash: end of stack");
  CHECK(d.fault_address() == "0x10");
  CHECK(d.crash_report().size() == 3);
  d.line("hvrun-crash: pid 6 (crash) SIGABRT, native stack of thread 6:");
  for (int i = 0; i < 200; ++i) d.line("  #" + std::to_string(i) + " 0x1 f+0x1 (/x)");
  const auto r = d.crash_report();
  CHECK_FALSE(d.fault_address().has_value());
  REQUIRE(r.size() == hvrun::StderrDigest::kMaxCrashLines + 1);
  CHECK(r.front().find("SIGABRT") != std::string::npos);
  CHECK(r.back() == "... 121 more lines");
  CHECK(hvrun::demangle_frame("  #0 0x1 _ZN4gloo7Context4sizeEv+0x5 (/x)") == "  #0 0x1 gloo::Context::size()+0x5 (/x)");
  CHECK(hvrun::demangle_frame("  #0 0x1 main+0x5 (/x)") == "  #0 0x1 main+0x5 (/x)");
}

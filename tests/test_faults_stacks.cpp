// The fault catalogue's stacks on a network-namespace lab (tests/support/fault_job.hpp): a crash shows
// its stack, a death its cause, a hang where every rank is, also for a rank inside dlopen or malloc.
// Needs root; without it the case says why it skips. The other faults: test_faults.cpp.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/fault_job.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;

TEST_CASE("fault catalogue: a crash shows its stack, a death its cause, a hang where every rank is",
          "[lab][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  const std::string faults = source_dir() + "/tests/faults/";
  const std::string python = "/usr/bin/python3";

  {
    INFO("a C rank dereferencing NULL on a remote host: its function, the fault address, the native stack");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 3 ]; then " + job.wait_trigger() + "exec " + build().crash_null +
                  "; fi; exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 139);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 3 on " + h2 + ": killed by SIGSEGV at address 0x0; its last stderr "
                                      "lines:\n    hvrun-crash: pid "));
    CHECK_THAT(r.err, Catch::Contains(" poison_pointer+0x"));
    CHECK_THAT(r.err, Catch::Contains(" main+0x"));
    CHECK_THAT(r.err, Catch::Contains("    hvrun-crash: end of stack\nhvrun: stopping the other 3 ranks"));
  }
  {
    INFO("a Python rank segfaulting through ctypes on a remote host: its Python frame, then its native stack");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 2 ]; then " + job.wait_trigger() + "exec " + python + " " + faults +
                      "ctypes_crash.py; fi; exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 139);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 2 on " + h2 + ": killed by SIGSEGV at address 0x0; its last stderr "
                                      "lines:\n    Fatal Python error: Segmentation fault"));
    CHECK_THAT(r.err, Catch::Contains("      File \"" + faults + "ctypes_crash.py\", line 7 in poison_batch"));
    CHECK_THAT(r.err, Catch::Contains("    hvrun-crash: pid "));
    CHECK_THAT(r.err, Catch::Contains("ffi_call+0x"));
  }
  {
    INFO("a rank that exits 1 with a traceback: the exception line is the cause");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 1 ]; then " + job.wait_trigger() + "exec " + python + " " + faults +
                      "traceback_exit.py; fi; exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 1 on " + h1 + ": exited with code 1: ValueError: bad shard 7; its "
                                      "last stderr lines:\n    Traceback (most recent call last):"));
  }
  {
    INFO("Ctrl-C on a hung job: every rank's stack, grouped, the stuck one named, all stopped within the grace");
    FaultJob job(lab, home);
    job.start({}, "exec " + python + " " + faults + "hang.py 2");
    job.mark();
    job.hvrun->signal(SIGINT);
    auto r = job.finish();
    CHECK(r.exit_code == 128 + SIGINT);
    CHECK_THAT(r.err, Catch::Contains("hvrun: where the 4 running ranks are:\nhvrun: ranks 0,1,3 on " + h1 + ", " + h2 +
                                      ": in allreduce_wait at hang.py:15 \u2190 <module> at hang.py:21\n"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 2 on " + h2 + ": in wait_for_shard at hang.py:10 \u2190 <module> at "
                                      "hang.py:20\n"));
    CHECK(job.last_teardown < kGrace + 1s);
  }
  {
    INFO("a host whose agent does not answer the stacks request is named; the others' stacks still print");
    FaultJob job(lab, home);
    job.start({}, "exec " + python + " " + faults + "hang.py 2");
    REQUIRE(job.agents.count(h2) == 1);
    const pid_t frozen = job.agents.at(h2);
    ::kill(frozen, SIGSTOP);
    job.mark();
    job.hvrun->signal(SIGINT);
    job.hvrun->pump_for(1500ms);
    ::kill(frozen, SIGCONT);  // it then stops its ranks, late
    auto r = job.finish();
    CHECK(r.exit_code == 128 + SIGINT);
    CHECK_THAT(r.err, Catch::Contains("hvrun: where the 4 running ranks are:\nhvrun: ranks 0,1 on " + h1 +
                                      ": in allreduce_wait at hang.py:15"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: no stacks from " + h2 + " (ranks 2,3) within 1 s"));
  }
  {
    INFO("--stall-timeout: no output and no CPU for that long, the stacks, then the job ends with exit 1");
    FaultJob job(lab, home);
    job.start({"--stall-timeout", "2", "--heartbeat-timeout", "2"}, "exec " + python + " " + faults + "hang.py 0");
    job.mark();
    auto r = job.finish();
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("hvrun: no rank printed anything or used CPU for 2 s (--stall-timeout); "
                                      "collecting every rank's stack, then stopping all ranks"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 0 on " + h1 + ": in wait_for_shard at hang.py:10"));
    CHECK(job.last_teardown >= 2s);
    CHECK(job.last_teardown < 2s + 1s + kGrace);
  }
}

TEST_CASE("fault catalogue: a rank inside dlopen or malloc still shows its own stack, at Ctrl-C and when it crashes",
          "[lab][faults]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(3);
  TempHome home;
  const std::string h1 = lab.host(1), h2 = lab.host(2);
  {
    INFO("Ctrl-C: ranks 0,1 have a thread inside dlopen (the loader's lock held) and wait in wait_here; ranks 2,3 "
         "wait inside malloc for the heap's lock. Each answers with its own frames, none with the kernel's wait");
    FaultJob job(lab, home);
    job.start({}, "if [ $HVRUN_RANK -lt 2 ]; then exec " + std::string(build().stuck_in_loader) + " " +
                  build().waiting_constructor + "; else exec " + build().stuck_in_malloc + " hang; fi");
    job.mark();
    job.hvrun->signal(SIGINT);
    auto r = job.finish();
    CHECK(r.exit_code == 128 + SIGINT);
    CHECK_THAT(r.err, Catch::Contains("hvrun: where the 4 running ranks are:\n"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: ranks 0,1 on " + h1 + ": in "));
    CHECK_THAT(r.err, Catch::Contains(" \u2190 wait_here \u2190 main"));
    CHECK_THAT(r.err, Catch::Contains("hvrun: ranks 2,3 on " + h2 + ": in "));
    CHECK_THAT(r.err, Catch::Contains(" \u2190 malloc \u2190 allocate_here \u2190 main"));
    CHECK_FALSE(Catch::Contains("gave no stack").match(r.err));
    CHECK_FALSE(Catch::Contains("kernel wait").match(r.err));
    CHECK(job.last_teardown < kGrace + 1s);
  }
  {
    INFO("a C rank whose malloc finds its heap corrupt and aborts, the heap's lock held: its stack, named");
    FaultJob job(lab, home);
    job.start({}, "echo ready; if [ $HVRUN_RANK = 1 ]; then " + job.wait_trigger() + "exec " + build().stuck_in_malloc +
                  " crash; fi; exec sleep 60");
    job.fire();
    auto r = job.finish();
    CHECK(r.exit_code == 128 + SIGABRT);
    CHECK_THAT(r.err, Catch::Contains("hvrun: rank 1 on " + h1 + ": killed by SIGABRT; its last stderr lines:\n"));
    CHECK_THAT(r.err, Catch::Contains("    hvrun-crash: pid "));
    CHECK_THAT(r.err, Catch::Contains(" malloc+0x"));
    CHECK_THAT(r.err, Catch::Contains(" allocate_here+0x"));
    CHECK_THAT(r.err, Catch::Contains(" main+0x"));
    CHECK_THAT(r.err, Catch::Contains("    hvrun-crash: end of stack\nhvrun: stopping the other 3 ranks"));
  }
}

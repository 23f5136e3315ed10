#include <catch2/catch.hpp>

#include "launcher/start/start_progress.hpp"

using hvrun::progress_text;
using hvrun::StartProgress;
using namespace std::chrono_literals;

TEST_CASE("progress: counts first, then after 2 s the hosts still pending by name", "[progress]") {
  StartProgress p{.hosts = 5, .connected = 3, .agents_up = 2, .pending = {"lab7", "lab12"}, .elapsed = 1999ms};
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5");
  p.elapsed = 2000ms;
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5; waiting for lab7, lab12");
  p.pending = {"lab7", "lab12", "lab13", "lab14", "lab15", "lab16"};
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5; waiting for lab7, lab12, lab13 (+3 more)");
  p.pending.clear();
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5");
}

TEST_CASE("progress: hosts whose login shell runs are counted apart, with how long it has run", "[progress]") {
  StartProgress p{.hosts = 32, .connected = 4, .agents_up = 4, .pending = {}, .elapsed = 2500ms,
                  .in_shell = {"lab5"}, .longest_shell = 1999ms};
  CHECK(progress_text(p) == "hvrun: connected 4/32, agents up 4/32");  // a shell under 2 s is not slow yet
  p.longest_shell = 12400ms;
  CHECK(progress_text(p) == "hvrun: connected 4/32, agents up 4/32; lab5: its login shell has run for 12 s (a slow "
                            "~/.bashrc?)");
  p.in_shell = std::vector<std::string>(28, "labN");
  p.pending = {"lab31"};
  CHECK(progress_text(p) == "hvrun: connected 4/32, agents up 4/32; 28 hosts: their login shell has run for 12 s (a "
                            "slow ~/.bashrc?); waiting for lab31");
  CHECK(hvrun::shell_stuck_text("lab5", 31500ms) ==
        "lab5: its login shell has run for 31 s and hvrun-agent has not started; time it with: ssh lab5 true");
  CHECK(hvrun::shell_timeout_of(30s) == 300s);
}

#include <catch2/catch.hpp>

#include "launcher/start/start_progress.hpp"

using hvrun::progress_text;
using hvrun::StartProgress;
using namespace std::chrono_literals;

TEST_CASE("progress: counts first, then after 2 s the hosts still pending by name", "[progress]") {
  StartProgress p{5, 3, 2, {"lab7", "lab12"}, 1999ms};
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5");
  p.elapsed = 2000ms;
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5; waiting for lab7, lab12");
  p.pending = {"lab7", "lab12", "lab13", "lab14", "lab15", "lab16"};
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5; waiting for lab7, lab12, lab13 (+3 more)");
  p.pending.clear();
  CHECK(progress_text(p) == "hvrun: connected 3/5, agents up 2/5");
}

// The hang autopsy as both drivers run it (launcher/job/hang_autopsy.hpp), on an io_context without
// sockets: who is asked, the report once every host answered or went, the silent named at the timeout,
// and a cancel that reports nothing.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/job/hang_autopsy.hpp"
#include "launcher/job/job_timeouts.hpp"

using namespace std::chrono_literals;

namespace {

struct Run {
  boost::asio::io_context io;
  std::vector<std::size_t> asked;
  std::optional<std::string> report;
  std::chrono::milliseconds grace{-1};
  hvrun::HangAutopsy autopsy{io, hvrun::HangAutopsy::Hooks{.ask = [this](std::size_t i) { asked.push_back(i); },
                                                          .ended = [this](const std::string& r, auto g) {
                                                            report = r;
                                                            grace = g;
                                                          }}};
};

hvrun::StacksMsg stacks_of(int rank, const std::string& where) {
  return hvrun::StacksMsg{{hvrun::RankStack{rank, "Thread 0x1 (most recent call first):\n  File \"train.py\", line 9 in " + where + "\n"}}};
}

void no_check(int) {}

}  // namespace

TEST_CASE("hang autopsy: hosts with ranks are asked; the report comes once each answered or went", "[autopsy]") {
  Run r;
  r.autopsy.start({"a", "b", "c"}, {"a (rank 0)", "", "c (ranks 1,2)"}, 3, 2000ms);
  CHECK(r.autopsy.active());
  CHECK(r.asked == std::vector<std::size_t>{0, 2});  // b runs no rank
  r.autopsy.stacks(1, stacks_of(5, "step"), no_check);  // not asked: dropped
  r.autopsy.stacks(0, stacks_of(0, "allreduce"), no_check);
  CHECK_FALSE(r.report);
  r.autopsy.host_gone(2);
  REQUIRE(r.report);
  CHECK_FALSE(r.autopsy.active());
  CHECK(r.grace == 2000ms);
  CHECK_THAT(*r.report, Catch::StartsWith("hvrun: where the 3 running ranks are:\n"));
  CHECK_THAT(*r.report, Catch::Contains("rank 0 on a"));
  CHECK_THAT(*r.report, !Catch::Contains("no stacks from"));  // c went: not waited for, not silent
  r.autopsy.stacks(0, stacks_of(0, "late"), no_check);     // after the end: dropped
}

TEST_CASE("hang autopsy: at kAutopsyTimeout the silent hosts are named; a rank not on its host is refused",
          "[autopsy]") {
  Run r;
  r.autopsy.start({"a", "b"}, {"a (rank 0)", "b (ranks 1,2)"}, 3, 0ms);
  CHECK_THROWS_AS(r.autopsy.stacks(0, stacks_of(7, "step"),
                                   [](int rank) {
                                     if (rank != 0) throw hvrun::ProtocolError("rank " + std::to_string(rank));
                                   }),
                  hvrun::ProtocolError);
  r.autopsy.stacks(0, stacks_of(0, "allreduce"), no_check);
  r.io.run_for(hvrun::kAutopsyTimeout + 500ms);
  REQUIRE(r.report);
  CHECK_THAT(*r.report, Catch::EndsWith("hvrun: no stacks from b (ranks 1,2) within 1 s"));
  CHECK(r.grace == 0ms);
}

TEST_CASE("hang autopsy: nobody to ask ends at once; a cancelled one reports nothing", "[autopsy]") {
  Run none;
  none.autopsy.start({"a"}, {""}, 0, 1000ms);
  REQUIRE(none.report);
  CHECK(*none.report == "hvrun: where the 0 running ranks are:");

  Run cancelled;
  cancelled.autopsy.start({"a"}, {"a (rank 0)"}, 1, 1000ms);
  cancelled.autopsy.cancel();
  CHECK_FALSE(cancelled.autopsy.active());
  cancelled.io.run_for(hvrun::kAutopsyTimeout + 300ms);
  CHECK_FALSE(cancelled.report);
}

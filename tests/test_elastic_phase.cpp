// The Horovod elastic driver's state machine (launcher/elastic/elastic_phase.hpp): the moves between its
// phases, what the events do in each, and that docs/DESIGN.md shows the table the code has.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/invariant.hpp"
#include "launcher/elastic/elastic_phase.hpp"

#include "tests/support/build_paths.hpp"

using hvrun::ElasticPhase;
using Phase = ElasticPhase::Phase;
using Event = ElasticPhase::Event;
using Action = ElasticPhase::Action;

TEST_CASE("elastic phase: the first world, forming, a reset that waits, and the end", "[elastic][phase]") {
  ElasticPhase p;
  CHECK(p.phase() == Phase::kWaiting);
  CHECK_FALSE(p.started());
  CHECK(p.on(Event::kHostSetChanged) == Action::kMaybeStart);
  CHECK(p.on(Event::kSlotsTimeout) == Action::kFail);
  CHECK(p.on(Event::kRankAndSize) == Action::kAnswerUnassigned);  // no worker of this job exists yet
  p.move_to(Phase::kOpen);
  CHECK(p.started());
  CHECK(p.on(Event::kHostSetChanged) == Action::kNotifyCoordinator);
  CHECK(p.on(Event::kRankAndSize) == Action::kHold);
  CHECK(p.on(Event::kSlotsTimeout) == Action::kIgnore);  // --elastic-timeout counts only while waiting
  CHECK(p.on(Event::kWorkerExited) == Action::kRecord);
  CHECK(p.on(Event::kLateGraceOver) == Action::kEndRoundEarly);
  CHECK(p.on(Event::kReplaceTimeout) == Action::kReplaceSilent);
  CHECK(p.on(Event::kRankPublished) == Action::kNoteReplacement);  // a replacement worker's

  p.move_to(Phase::kForming);
  CHECK(p.on(Event::kRankPublished) == Action::kReleaseIfLast);
  CHECK(p.on(Event::kFormingTimeout) == Action::kRelease);
  CHECK(p.on(Event::kWorkerExited) == Action::kEndFormingRecord);
  CHECK(p.on(Event::kAgentLost) == Action::kEndFormingRecord);
  p.move_to(Phase::kOpen);
  CHECK(p.on(Event::kFormingTimeout) == Action::kIgnore);  // a timer that fires after the release

  p.move_to(Phase::kResuming);
  CHECK(p.on(Event::kHostSetChanged) == Action::kMaybeResume);
  CHECK(p.on(Event::kSlotsTimeout) == Action::kFail);
  CHECK(p.on(Event::kLateGraceOver) == Action::kIgnore);
  CHECK(p.on(Event::kReplaceTimeout) == Action::kIgnore);  // its slot may not be in the next world
  p.move_to(Phase::kOpen);

  CHECK(p.on(Event::kSignal) == Action::kStopAll);
  p.move_to(Phase::kStopping);
  CHECK(p.stopping());
  CHECK(p.on(Event::kSignal) == Action::kFinishNow);
  CHECK(p.on(Event::kRankAndSize) == Action::kAnswerUnassigned);
  CHECK(p.on(Event::kWorkerExited) == Action::kMaybeFinish);
  CHECK(p.on(Event::kAgentLost) == Action::kMaybeFinish);
  CHECK(p.on(Event::kDiscovered) == Action::kIgnore);
  CHECK(p.on(Event::kFirstDiscoveryFailed) == Action::kIgnore);
  CHECK(p.on(Event::kRoundEnded) == Action::kIgnore);
  p.move_to(Phase::kDone);
  CHECK(p.stopping());
  CHECK(p.on(Event::kAgentLost) == Action::kPollClosed);
}

TEST_CASE("elastic phase: a move the machine does not have is hvrun's bug, and changes nothing", "[elastic][phase]") {
  ElasticPhase p;
  CHECK_THROWS_AS(p.move_to(Phase::kForming), hvrun::InternalError);  // no world to form beside yet
  CHECK_THROWS_AS(p.move_to(Phase::kDone), hvrun::InternalError);     // the workers are stopped first
  CHECK(p.phase() == Phase::kWaiting);
  p.move_to(Phase::kWaiting);  // staying put
  p.move_to(Phase::kStopping);
  CHECK_THROWS_AS(p.move_to(Phase::kOpen), hvrun::InternalError);  // nothing starts again once stopping
  p.move_to(Phase::kDone);
  CHECK_THROWS_AS(p.move_to(Phase::kStopping), hvrun::InternalError);

  // Every phase before kStopping can stop; only kStopping reaches kDone.
  for (Phase from : {Phase::kWaiting, Phase::kOpen, Phase::kForming, Phase::kResuming}) {
    CHECK(ElasticPhase::allowed(from, Phase::kStopping));
    CHECK_FALSE(ElasticPhase::allowed(from, Phase::kDone));
  }
  CHECK_FALSE(ElasticPhase::allowed(Phase::kResuming, Phase::kForming));  // activate() passes kOpen first
  CHECK_FALSE(ElasticPhase::allowed(Phase::kForming, Phase::kResuming));  // the held answers go out first
}

TEST_CASE("elastic phase: the failure of the discovery script is fatal only on its first run", "[elastic][phase]") {
  ElasticPhase p;
  CHECK(p.on(Event::kFirstDiscoveryFailed) == Action::kFail);
  CHECK(p.on(Event::kDiscoveryFailed) == Action::kWarn);
  p.move_to(Phase::kOpen);
  CHECK(p.on(Event::kDiscoveryFailed) == Action::kWarn);
  CHECK(p.on(Event::kDiscovered) == Action::kAddHosts);
}

TEST_CASE("elastic phase: docs/DESIGN.md shows the driver's table as the code has it", "[elastic][phase]") {
  std::ifstream in(std::filesystem::path(hvrun::test::build().source_dir) / "docs/DESIGN.md");
  REQUIRE(in);
  std::stringstream design;
  design << in.rdbuf();
  const std::string table = ElasticPhase::markdown_table();
  INFO("paste this into DESIGN.md 6.9:\n" << table);
  CHECK(design.str().find(table) != std::string::npos);
}

// The agent's protocol state machine (agent/agent_state.hpp): which messages each phase accepts, what
// terminate, shutdown and the launcher's going do to the ranks and to the agent, without a process.
#include <signal.h>

#include <catch2/catch.hpp>

#include "agent/agent_state.hpp"
#include "common/error.hpp"

using hvrun::AgentState;
using hvrun::ControlMessage;
using hvrun::ProtocolError;
using End = AgentState::End;
using Phase = AgentState::Phase;
using namespace std::chrono_literals;

namespace {

// Every decision of a message that only does its own work: nothing to the ranks, the agent goes on.
void check_nothing(const AgentState::Decision& d) {
  CHECK(d.signal == 0);
  CHECK_FALSE(d.kill_after);
  CHECK(d.end == End::kNone);
}

}  // namespace

TEST_CASE("agent state: the job comes first, once; then probes, the rendezvous and one launch",
          "[agent_state]") {
  AgentState s;
  CHECK(s.phase() == Phase::kAwaitingJob);
  CHECK_THROWS_MATCHES(s.on_message(hvrun::LaunchMsg{}), ProtocolError,
                       Catch::Message("launcher: launch before the job message"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::ProbeRequestMsg{}), ProtocolError,
                       Catch::Message("launcher: probe request before the job message"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::KnockMsg{}), ProtocolError,
                       Catch::Message("launcher: knock request before the job message"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::LinkTestRequestMsg{}), ProtocolError,
                       Catch::Message("launcher: link test request before the job message"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::HorovodRendezvousMsg{}), ProtocolError,
                       Catch::Message("launcher: Horovod rendezvous request before the job message"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::FingerprintRequestMsg{}), ProtocolError,
                       Catch::Message("launcher: fingerprint request out of turn"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::SyncCheckMsg{}), ProtocolError,
                       Catch::Message("launcher: sync check out of turn"));
  CHECK(s.phase() == Phase::kAwaitingJob);

  check_nothing(s.on_message(hvrun::JobMsg{}));
  CHECK(s.phase() == Phase::kJobKnown);
  check_nothing(s.on_message(hvrun::KnockMsg{}));
  check_nothing(s.on_message(hvrun::LinkTestRequestMsg{}));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::JobMsg{}), ProtocolError,
                       Catch::Message("launcher: a second job message"));
  check_nothing(s.on_message(hvrun::SyncCheckMsg{}));
  check_nothing(s.on_message(hvrun::FingerprintRequestMsg{}));
  check_nothing(s.on_message(hvrun::ProbeRequestMsg{}));
  check_nothing(s.on_message(hvrun::ProbeRequestMsg{}));  // a retry round
  check_nothing(s.on_message(hvrun::LaunchMsg{}));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::FingerprintRequestMsg{}), ProtocolError,
                       Catch::Message("launcher: fingerprint request out of turn"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::SyncCheckMsg{}), ProtocolError,
                       Catch::Message("launcher: sync check out of turn"));
  CHECK(s.phase() == Phase::kLaunched);
  CHECK_THROWS_MATCHES(s.on_message(hvrun::LaunchMsg{}), ProtocolError,
                       Catch::Message("launcher: a second launch request"));
  CHECK_THROWS_MATCHES(s.on_message(hvrun::JobMsg{}), ProtocolError,
                       Catch::Message("launcher: a second job message"));
  check_nothing(s.on_message(hvrun::ProbeRequestMsg{}));
  CHECK(s.exit_code() == 1);  // nothing has said the agent ends well yet
}

TEST_CASE("agent state: a Horovod elastic job's agent takes a launch per change of the world", "[agent]") {
  hvrun::AgentState s;
  hvrun::JobMsg job;
  job.elastic = true;
  check_nothing(s.on_message(job));
  check_nothing(s.on_message(hvrun::LaunchMsg{}));
  check_nothing(s.on_message(hvrun::LaunchMsg{}));  // a newcomer slot on this host, beside the running ranks
  CHECK(s.phase() == Phase::kLaunched);
  CHECK_THROWS_MATCHES(s.on_message(hvrun::JobMsg{}), ProtocolError, Catch::Message("launcher: a second job message"));
}

TEST_CASE("agent state: a second Horovod rendezvous is refused only once one is served", "[agent_state]") {
  AgentState s;
  s.on_message(hvrun::JobMsg{});
  check_nothing(s.on_message(hvrun::HorovodRendezvousMsg{}));
  // The first could not listen (the launcher got a FatalMsg): asking again is allowed.
  check_nothing(s.on_message(hvrun::HorovodRendezvousMsg{}));
  s.serving_horovod_rendezvous();
  CHECK_THROWS_MATCHES(s.on_message(hvrun::HorovodRendezvousMsg{}), ProtocolError,
                       Catch::Message("launcher: a second Horovod rendezvous request"));
}

TEST_CASE("agent state: a restart reopens the launch and the Horovod rendezvous, only after a launch",
          "[agent_state]") {
  AgentState s;
  CHECK_THROWS_MATCHES(s.on_message(hvrun::RestartMsg{1, false}), ProtocolError,
                       Catch::Message("launcher: restart before the launch"));
  s.on_message(hvrun::JobMsg{});
  CHECK_THROWS_MATCHES(s.on_message(hvrun::RestartMsg{1, false}), ProtocolError,
                       Catch::Message("launcher: restart before the launch"));
  s.on_message(hvrun::HorovodRendezvousMsg{});
  s.serving_horovod_rendezvous();
  s.on_message(hvrun::LaunchMsg{});
  for (int attempt = 1; attempt <= 2; ++attempt) {
    check_nothing(s.on_message(hvrun::RestartMsg{attempt, true}));
    CHECK(s.phase() == Phase::kJobKnown);
    CHECK_THROWS_MATCHES(s.on_message(hvrun::RestartMsg{attempt, true}), ProtocolError,
                         Catch::Message("launcher: restart before the launch"));
    check_nothing(s.on_message(hvrun::HorovodRendezvousMsg{}));  // the old one is gone with the restart
    s.serving_horovod_rendezvous();
    check_nothing(s.on_message(hvrun::LaunchMsg{}));
    CHECK(s.phase() == Phase::kLaunched);
  }
}

TEST_CASE("agent state: heartbeats, acks, terminate and shutdown are accepted in every phase",
          "[agent_state]") {
  AgentState s;
  const auto phase = GENERATE(Phase::kAwaitingJob, Phase::kJobKnown, Phase::kLaunched);
  if (phase != Phase::kAwaitingJob) s.on_message(hvrun::JobMsg{});
  if (phase == Phase::kLaunched) s.on_message(hvrun::LaunchMsg{});
  REQUIRE(s.phase() == phase);
  check_nothing(s.on_message(hvrun::HeartbeatMsg{}));
  check_nothing(s.on_message(hvrun::OutputAckMsg{1}));  // its bounds are OutputFlow's
  const auto t = s.on_message(hvrun::TerminateMsg{2500, {}});
  CHECK(t.signal == SIGTERM);
  REQUIRE(t.kill_after);
  CHECK(*t.kill_after == 2500ms);
  CHECK(t.end == End::kNone);
  CHECK(s.phase() == phase);
  // Some ranks only (an elastic worker replaced): the agent kills those itself; nothing for the others.
  check_nothing(s.on_message(hvrun::TerminateMsg{2500, {3}}));
  CHECK(s.phase() == phase);
  const auto d = s.on_message(hvrun::ShutdownMsg{});
  CHECK(d.signal == SIGKILL);
  CHECK_FALSE(d.kill_after);
  CHECK(d.end == End::kAfterFlush);
  CHECK(s.exit_code() == 0);
  CHECK_FALSE(s.finished());  // until the flush is done
}

TEST_CASE("agent state: messages that only the launcher receives are refused", "[agent_state]") {
  const ControlMessage msg = GENERATE(ControlMessage{hvrun::HelloMsg{}}, ControlMessage{hvrun::ReadyMsg{}},
                                      ControlMessage{hvrun::ProbeResultMsg{}}, ControlMessage{hvrun::StartedMsg{}},
                                      ControlMessage{hvrun::ExitedMsg{}}, ControlMessage{hvrun::FatalMsg{}},
                                      ControlMessage{hvrun::HorovodRendezvousReadyMsg{}},
                                      ControlMessage{hvrun::FingerprintMsg{}},
                                      ControlMessage{hvrun::RestartReadyMsg{}}, ControlMessage{hvrun::KnockResultMsg{}},
                                      ControlMessage{hvrun::NoticeMsg{}}, ControlMessage{hvrun::ObservationMsg{}});
  AgentState s;
  s.on_message(hvrun::JobMsg{});
  CHECK_THROWS_MATCHES(s.on_message(msg), ProtocolError, Catch::Message("launcher: unexpected control message"));
}

TEST_CASE("agent state: the launcher's going kills every group and ends at once, reported once",
          "[agent_state]") {
  AgentState s;
  s.on_message(hvrun::JobMsg{});
  s.on_message(hvrun::ShutdownMsg{});
  REQUIRE(s.exit_code() == 0);
  // The channel closes before the flush is done: the agent is gone, not shut down.
  const auto gone = s.on_launcher_gone();
  CHECK(gone.report);
  CHECK(gone.decision.signal == SIGKILL);
  CHECK_FALSE(gone.decision.kill_after);
  CHECK(gone.decision.end == End::kNow);
  CHECK(s.exit_code() == 1);
  s.finish();
  CHECK(s.finished());
  CHECK(s.phase() == Phase::kDone);
  const auto again = s.on_launcher_gone();  // a late close or signal after the end
  CHECK_FALSE(again.report);
  CHECK(again.decision.signal == 0);
  CHECK(again.decision.end == End::kNone);
  CHECK(s.exit_code() == 1);
}

TEST_CASE("agent state: a shutdown flushed to the end exits 0", "[agent_state]") {
  AgentState s;
  s.on_message(hvrun::JobMsg{});
  s.on_message(hvrun::LaunchMsg{});
  s.on_message(hvrun::ShutdownMsg{});
  s.finish();  // the flush is done
  CHECK(s.exit_code() == 0);
  CHECK_FALSE(s.on_launcher_gone().report);  // the channel's close that follows changes nothing
  CHECK(s.exit_code() == 0);
}

#include "agent/agent_state.hpp"

#include <signal.h>

#include <type_traits>
#include <variant>

#include "common/error.hpp"

namespace hvrun {

AgentState::Decision AgentState::on_message(const ControlMessage& msg) {
  return std::visit(
      [this](const auto& m) -> Decision {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, JobMsg>) {
          if (phase_ != Phase::kAwaitingJob) throw ProtocolError("launcher: a second job message");
          phase_ = Phase::kJobKnown;
          elastic_ = m.elastic;
          return {};
        } else if constexpr (std::is_same_v<M, HorovodRendezvousMsg>) {
          if (phase_ == Phase::kAwaitingJob)
            throw ProtocolError("launcher: Horovod rendezvous request before the job message");
          if (serving_rendezvous_) throw ProtocolError("launcher: a second Horovod rendezvous request");
          return {};
        } else if constexpr (std::is_same_v<M, ProbeRequestMsg>) {
          if (phase_ == Phase::kAwaitingJob) throw ProtocolError("launcher: probe request before the job message");
          return {};
        } else if constexpr (std::is_same_v<M, LinkTestRequestMsg>) {
          if (phase_ == Phase::kAwaitingJob) throw ProtocolError("launcher: link test request before the job message");
          return {};
        } else if constexpr (std::is_same_v<M, KnockMsg>) {
          if (phase_ == Phase::kAwaitingJob) throw ProtocolError("launcher: knock request before the job message");
          return {};
        } else if constexpr (std::is_same_v<M, LaunchMsg>) {
          if (phase_ == Phase::kAwaitingJob) throw ProtocolError("launcher: launch before the job message");
          if (phase_ == Phase::kLaunched && !elastic_) throw ProtocolError("launcher: a second launch request");
          phase_ = Phase::kLaunched;
          return {};
        } else if constexpr (std::is_same_v<M, RestartMsg>) {
          // Whether every rank has exited is the agent's to check (it holds the rank table).
          if (phase_ != Phase::kLaunched) throw ProtocolError("launcher: restart before the launch");
          phase_ = Phase::kJobKnown;
          serving_rendezvous_ = false;
          return {};
        } else if constexpr (std::is_same_v<M, FingerprintRequestMsg>) {
          if (phase_ != Phase::kJobKnown) throw ProtocolError("launcher: fingerprint request out of turn");
          return {};
        } else if constexpr (std::is_same_v<M, SyncCheckMsg>) {
          if (phase_ != Phase::kJobKnown) throw ProtocolError("launcher: sync check out of turn");
          return {};
        } else if constexpr (std::is_same_v<M, StacksRequestMsg>) {
          // Before the launch there is no rank to ask; the agent answers with an empty list then.
          if (phase_ == Phase::kAwaitingJob) throw ProtocolError("launcher: stacks request before the job message");
          return {};
        } else if constexpr (std::is_same_v<M, TerminateMsg>) {
          if (!m.ranks.empty()) return {};  // the listed ranks alone: the agent's own (Agent::handle)
          return {SIGTERM, std::chrono::milliseconds(m.grace_ms), End::kNone};
        } else if constexpr (std::is_same_v<M, ShutdownMsg>) {
          // The launcher has every exit it needs; whatever the ranks left behind in their groups goes now.
          exit_code_ = 0;
          return {SIGKILL, std::nullopt, End::kAfterFlush};
        } else if constexpr (std::is_same_v<M, HeartbeatMsg> || std::is_same_v<M, OutputAckMsg>) {
          return {};  // an ack's bounds are the output flow's to check (OutputFlow::acknowledge)
        } else {
          throw ProtocolError("launcher: unexpected control message");
        }
      },
      msg);
}

AgentState::Gone AgentState::on_launcher_gone() {
  if (finished()) return {};
  exit_code_ = 1;
  return {true, {SIGKILL, std::nullopt, End::kNow}};
}

}  // namespace hvrun

// The launcher's ends of the agents' channels (launcher/start/agent_links.hpp), over a socketpair: the
// JobMsg first, heartbeats, the watchdog on a silent agent, output acks and closed links.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <cstring>
#include <variant>

#include "common/control_message.hpp"
#include "common/frame_channel.hpp"
#include "launcher/start/agent_links.hpp"

using hvrun::AgentLinks;
using hvrun::ControlMessage;
using hvrun::Frame;
using hvrun::FrameChannel;
using hvrun::UniqueFd;
using namespace std::chrono_literals;

namespace {

// The agent's end: records every control message it gets.
struct FakeAgent {
  FakeAgent(boost::asio::io_context& io, int fd) : channel(io, UniqueFd(fd), UniqueFd(::dup(fd)), "launcher") {
    channel.start({.on_frame = [this](Frame&& f) { got.push_back(hvrun::decode_control(f.payload, "launcher")); },
                   .on_closed = [this](const std::string&) { closed = true; },
                   .on_drained = {}});
  }
  template <typename M>
  int count() const {
    int n = 0;
    for (const auto& m : got) n += std::holds_alternative<M>(m);
    return n;
  }
  FrameChannel channel;
  std::vector<ControlMessage> got;
  bool closed = false;
};

struct Pair {
  Pair() {
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  }
  int fds[2];
};

}  // namespace

TEST_CASE("agent links: the JobMsg first, then heartbeats; silence closes the link with its reason",
          "[agent_links]") {
  boost::asio::io_context io;
  std::vector<std::string> closed;
  AgentLinks links(io, {"lab1", "lab2"}, 1000ms,
                   {.on_frame = [](std::size_t, Frame&&) {},
                    .on_closed = [&](std::size_t i, const std::string& e) {
                      closed.push_back(std::to_string(i) + " " + e);
                    }});
  Pair p;
  FakeAgent agent(io, p.fds[1]);
  CHECK_FALSE(links.attached(0));
  links.attach(0, UniqueFd(p.fds[0]), hvrun::JobMsg{"00", 1000, 0, true});
  CHECK(links.attached(0));
  CHECK(links.live(0));
  CHECK_FALSE(links.live(1));
  CHECK(links.peer(0) == "agent on lab1");
  links.start_heartbeats();
  io.run_for(500ms);  // heartbeats every 250 ms; the agent says nothing
  REQUIRE_FALSE(agent.got.empty());
  CHECK(std::holds_alternative<hvrun::JobMsg>(agent.got.front()));
  CHECK(agent.count<hvrun::HeartbeatMsg>() >= 1);
  CHECK(closed.empty());
  io.restart();
  io.run_for(1000ms);
  REQUIRE(closed.size() == 1);
  CHECK(closed[0] == "0 no answer for 1 s (host down or network cut?); raise --heartbeat-timeout if it is only slow");
  links.mark_closed(0);
  CHECK(links.closed(0));
  CHECK_FALSE(links.all_closed());
  links.abandon_unattached();  // lab2 never attached
  CHECK(links.all_closed());
  links.close_all();
}

TEST_CASE("agent links: output is acknowledged in quarter windows, held back while congested, and "
          "nothing goes to a closed link", "[agent_links]") {
  boost::asio::io_context io;
  AgentLinks links(io, {"lab1"}, 20'000ms,
                   {.on_frame = [](std::size_t, Frame&&) {}, .on_closed = [](std::size_t, const std::string&) {}});
  Pair p;
  FakeAgent agent(io, p.fds[1]);
  links.attach(0, UniqueFd(p.fds[0]), hvrun::JobMsg{"00", 20'000, 0, true});
  links.took_output(0, hvrun::kOutputWindow / 8, false);  // below a quarter window: held
  links.took_output(0, hvrun::kOutputWindow / 8, false);  // a quarter: acknowledged
  links.took_output(0, 100, true);                        // congested: held
  io.run_for(100ms);
  REQUIRE(agent.count<hvrun::OutputAckMsg>() == 1);
  links.acknowledge_all();  // stdout caught up
  links.send_all(hvrun::TerminateMsg{5, {}});
  io.restart();
  io.run_for(100ms);
  std::vector<int> acks;
  for (const auto& m : agent.got)
    if (const auto* a = std::get_if<hvrun::OutputAckMsg>(&m)) acks.push_back(a->bytes);
  CHECK(acks == std::vector<int>{static_cast<int>(hvrun::kOutputWindow / 4), 100});
  CHECK(agent.count<hvrun::TerminateMsg>() == 1);
  links.mark_closed(0);
  links.send(0, hvrun::ShutdownMsg{});
  io.restart();
  io.run_for(50ms);
  CHECK(agent.count<hvrun::ShutdownMsg>() == 0);
  links.close_all();
  io.restart();
  io.run_for(50ms);
  CHECK(agent.closed);
}

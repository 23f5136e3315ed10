// The heartbeat rule shared by the launcher and the agent (common/heartbeat.hpp): the sending
// interval, the sender's stop, and the watchdog's silence, rearm and disarmed state.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/heartbeat.hpp"

using namespace std::chrono_literals;

TEST_CASE("heartbeat: a quarter period between heartbeats, none after stop", "[heartbeat]") {
  CHECK(hvrun::heartbeat_interval(20'000ms) == 5'000ms);
  CHECK(hvrun::heartbeat_interval(1ms) == 0ms);
  boost::asio::io_context io;
  int sent = 0;
  hvrun::HeartbeatSender sender(io, [&] { ++sent; });
  sender.start(200ms);  // every 50 ms
  io.run_for(230ms);
  CHECK(sent >= 1);  // late timers under load send fewer, never more
  CHECK(sent <= 4);
  sender.stop();
  const int at_stop = sent;
  io.restart();
  io.run_for(150ms);
  CHECK(sent == at_stop);
}

TEST_CASE("heartbeat: the watchdog fires after a silent period, not while rearmed, never disarmed",
          "[heartbeat]") {
  boost::asio::io_context io;
  int silences = 0;
  hvrun::Watchdog dog(io, [&] { ++silences; });
  dog.rearm();  // no period yet: disarmed
  io.run_for(50ms);
  CHECK(silences == 0);
  dog.set_period(300ms);
  CHECK(dog.period() == 300ms);
  for (int i = 0; i < 4; ++i) {  // frames every 50 ms keep it quiet
    dog.rearm();
    io.restart();
    io.run_for(50ms);
  }
  CHECK(silences == 0);
  io.restart();
  io.run_for(400ms);
  CHECK(silences == 1);
  dog.rearm();
  dog.cancel();
  io.restart();
  io.run_for(400ms);
  CHECK(silences == 1);
}

// The agent's output flow control (agent/output_flow.hpp): the window of unacknowledged output, the
// congested channel, which readers pause and which an ack resumes, without pipes or sockets.
#include <catch2/catch.hpp>

#include "agent/output_flow.hpp"
#include "common/error.hpp"

using hvrun::kOutputWindow;
using hvrun::OutputFlow;
using hvrun::OutputStream;
using Reader = OutputFlow::Reader;

TEST_CASE("output flow: readers read until a window is unacknowledged, then pause until an ack",
          "[output_flow]") {
  OutputFlow f;
  const Reader out0{0, OutputStream::kStdout}, err0{0, OutputStream::kStderr}, out1{1, OutputStream::kStdout};
  CHECK(f.admit(out0, false));
  f.sent(kOutputWindow - 1);
  CHECK_FALSE(f.blocked(false));
  CHECK(f.admit(err0, false));
  f.sent(1);  // a whole window in flight
  CHECK(f.blocked(false));
  CHECK_FALSE(f.admit(out1, false));
  CHECK_FALSE(f.admit(out0, false));
  CHECK(f.paused() == 2);
  CHECK(f.resume(false).empty());  // nothing changed: still blocked, still paused
  CHECK(f.paused() == 2);
  f.acknowledge(1);
  CHECK(f.unacked() == kOutputWindow - 1);
  CHECK(f.resume(false) == std::vector<Reader>{out1, out0});  // in the order they paused
  CHECK(f.paused() == 0);
  CHECK(f.resume(false).empty());
}

TEST_CASE("output flow: a congested channel pauses readers whatever the window says", "[output_flow]") {
  OutputFlow f;
  const Reader r{3, OutputStream::kStderr};
  CHECK(f.blocked(true));
  CHECK_FALSE(f.admit(r, true));
  CHECK(f.resume(true).empty());  // an ack while the channel is still full
  CHECK(f.resume(false) == std::vector<Reader>{r});  // the channel drained
}

TEST_CASE("output flow: reads past the window are counted, and acks bring it back", "[output_flow]") {
  OutputFlow f;
  f.sent(kOutputWindow);
  f.sent(hvrun::kDrainChunks * std::size_t{64 << 10});  // a reaped rank's drain goes past the window
  CHECK(f.blocked(false));
  f.acknowledge(static_cast<int>(kOutputWindow));
  CHECK(f.blocked(false));  // the drained bytes are still in flight, a whole window of them
  f.acknowledge(1);
  CHECK_FALSE(f.blocked(false));
}

TEST_CASE("output flow: an ack of nothing or of more than is outstanding is a protocol error",
          "[output_flow]") {
  OutputFlow f;
  f.sent(100);
  CHECK_THROWS_MATCHES(f.acknowledge(101), hvrun::ProtocolError,
                       Catch::Message("launcher: acknowledged 101 bytes of output, 100 were outstanding"));
  CHECK_THROWS_MATCHES(f.acknowledge(0), hvrun::ProtocolError,
                       Catch::Message("launcher: acknowledged 0 bytes of output, 100 were outstanding"));
  CHECK_THROWS_AS(f.acknowledge(-5), hvrun::ProtocolError);
  CHECK(f.unacked() == 100);  // a refused ack changes nothing
  f.acknowledge(100);
  CHECK(f.unacked() == 0);
  CHECK_THROWS_MATCHES(f.acknowledge(1), hvrun::ProtocolError,
                       Catch::Message("launcher: acknowledged 1 bytes of output, 0 were outstanding"));
}

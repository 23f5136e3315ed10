// A stand-in for hvrun-agent that claims another version, for the version-mismatch test.
#include <unistd.h>

#include <string>

#include "common/control_message.hpp"
#include "common/frame_codec.hpp"

int main() {
  const std::string hello =
      hvrun::encode_frame(hvrun::FrameType::kControl, hvrun::encode_control(hvrun::HelloMsg{"0.0.0-fake", "fake", 1, 1, 1, {}, {}, {}, {}}));
  if (::write(1, hello.data(), hello.size()) != static_cast<ssize_t>(hello.size())) return 1;
  char buf[4096];
  while (::read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}

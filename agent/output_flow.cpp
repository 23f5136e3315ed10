#include "agent/output_flow.hpp"

#include <string>
#include <utility>

#include "common/error.hpp"

namespace hvrun {

bool OutputFlow::admit(Reader reader, bool channel_congested) {
  if (!blocked(channel_congested)) return true;
  paused_.push_back(reader);
  return false;
}

void OutputFlow::acknowledge(int bytes) {
  if (bytes <= 0 || static_cast<std::size_t>(bytes) > unacked_)
    throw ProtocolError("launcher: acknowledged " + std::to_string(bytes) + " bytes of output, " +
                        std::to_string(unacked_) + " were outstanding");
  unacked_ -= static_cast<std::size_t>(bytes);
}

std::vector<OutputFlow::Reader> OutputFlow::resume(bool channel_congested) {
  if (blocked(channel_congested)) return {};
  return std::exchange(paused_, {});
}

}  // namespace hvrun

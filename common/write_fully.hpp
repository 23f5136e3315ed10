#pragma once
// Blocking writes of a whole buffer: hvrun's own stdout and stderr, the agent's files (any descriptor,
// non-blocking ones included).
#include <string_view>

namespace hvrun {

// Writes all of `bytes`, retrying EINTR and waiting out EAGAIN; false when the reader went away or the
// write failed (errno says why).
bool write_fully(int fd, std::string_view bytes);

}  // namespace hvrun

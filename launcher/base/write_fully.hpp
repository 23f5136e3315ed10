#pragma once
// Blocking writes to hvrun's own stdout and stderr (or any descriptor that may be non-blocking).
#include <string_view>

namespace hvrun {

// Writes all of `bytes`, retrying EINTR and waiting out EAGAIN; false when the reader went away.
bool write_fully(int fd, std::string_view bytes);

}  // namespace hvrun

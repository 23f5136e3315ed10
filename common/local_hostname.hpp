#pragma once
// This host's name as gethostname(2) gives it: what an agent reports in its hello, what the probe
// listener answers with, what a rank calls its host, and what the launcher compares host names with.
#include <string>

namespace hvrun {

// Throws SystemError when gethostname fails. A name the kernel truncated is returned as far as it goes.
std::string local_hostname();

}  // namespace hvrun

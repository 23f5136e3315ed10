#include "agent/wire/local_hostname.hpp"

#include <unistd.h>

#include "agent/wire/error.hpp"

namespace hvrun {

std::string local_hostname() {
  // One byte more than gethostname may fill, so the name is terminated even when it was truncated.
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) throw_errno("gethostname");
  return name;
}

}  // namespace hvrun

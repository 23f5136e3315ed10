#include "common/local_hostname.hpp"

#include <unistd.h>

#include "common/error.hpp"

namespace hvrun {

std::string local_hostname() {
  // One byte more than gethostname may fill, so the name is terminated even when it was truncated.
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) throw_errno("gethostname");
  return name;
}

}  // namespace hvrun

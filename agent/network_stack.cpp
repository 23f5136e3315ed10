#include "agent/network_stack.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/log.hpp"

namespace hvrun {

std::string network_stack_identity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  struct stat ns {};
  if (boot_id.empty()) {
    log_of(LogSubsys::kStart).debug("cannot read /proc/sys/kernel/random/boot_id; duplicate hosts go unnoticed");
    return {};
  }
  // The namespace's inode on nsfs (and that file system's device) name it for as long as it exists.
  if (::stat("/proc/self/ns/net", &ns) != 0) {
    log_of(LogSubsys::kStart)
        .debug("stat(/proc/self/ns/net) failed: {}; duplicate hosts go unnoticed", std::strerror(errno));
    return {};
  }
  return boot_id + "/net:" + std::to_string(ns.st_dev) + ":" + std::to_string(ns.st_ino);
}

void read_ssh_connection(std::string& client_address, std::string& server_address) {
  const char* c = std::getenv("SSH_CONNECTION");
  if (!c) return;
  std::istringstream words(c);
  std::string client_port, server_port;
  words >> client_address >> client_port >> server_address >> server_port;
}

}  // namespace hvrun

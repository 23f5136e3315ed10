#include "common/interface_list.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include <bit>
#include <cstdlib>
#include <memory>

#include "common/error.hpp"
#include "common/file_digest.hpp"

namespace hvrun {

namespace {

// address_text with the interface as scope of a link-local IPv6 address.
std::string scoped_address_text(const sockaddr* sa, const char* ifname) {
  std::string text = address_text(sa);
  // A link-local address means nothing without its interface.
  if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr))
    text += std::string("%") + ifname;
  return text;
}

// Leading one bits of a netmask (a contiguous mask, as the kernel keeps them); -1 without one.
int prefix_length(const sockaddr* mask) {
  if (mask == nullptr) return -1;
  const unsigned char* bytes = nullptr;
  std::size_t size = 0;
  if (mask->sa_family == AF_INET) {
    bytes = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    size = 4;
  } else if (mask->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr.s6_addr;
    size = 16;
  } else {
    return -1;
  }
  int bits = 0;
  for (std::size_t i = 0; i < size; ++i) bits += std::popcount(static_cast<unsigned>(bytes[i]));
  return bits;
}

// -1 when unknown. A virtual NIC's speed file fails its read with EINVAL: a plain read, since an
// ifstream throws (and catches) an exception inside for that.
int read_speed(const std::string& name) {
  const std::string text = read_file_head("/sys/class/net/" + name + "/speed", 32);
  const int speed = std::atoi(text.c_str());
  return speed > 0 ? speed : -1;
}

bool has_device(const std::string& name) {
  struct stat st{};
  return ::stat(("/sys/class/net/" + name + "/device").c_str(), &st) == 0;
}

// The name of the device `name` is enslaved to, from the /sys/class/net/NAME/master link; "" without one.
std::string master_of(const std::string& name) {
  char target[PATH_MAX] = {};
  const ssize_t n = ::readlink(("/sys/class/net/" + name + "/master").c_str(), target, sizeof target - 1);
  if (n <= 0) return {};  // ENOENT: not enslaved; anything else: unknown, treated the same
  const std::string path(target, static_cast<std::size_t>(n));
  return path.substr(path.rfind('/') + 1);
}

}  // namespace

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::vector<InterfaceInfo> list_interfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw_errno("getifaddrs", "listing network interfaces");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, &::freeifaddrs);
  std::vector<InterfaceInfo> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6))
      continue;
    InterfaceInfo* info = nullptr;
    for (auto& i : out)
      if (i.name == a->ifa_name) info = &i;
    if (info == nullptr) {
      InterfaceInfo fresh;
      fresh.name = a->ifa_name;
      fresh.up = (a->ifa_flags & IFF_UP) != 0;
      fresh.running = (a->ifa_flags & IFF_RUNNING) != 0;
      fresh.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
      fresh.is_virtual = !fresh.loopback && !has_device(fresh.name);
      fresh.speed_mbps = read_speed(fresh.name);
      fresh.master = master_of(fresh.name);
      out.push_back(std::move(fresh));
      info = &out.back();
    }
    info->addresses.push_back(scoped_address_text(a->ifa_addr, a->ifa_name));
    info->prefix_lengths.push_back(prefix_length(a->ifa_netmask));
  }
  return out;
}

std::vector<std::string> own_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw_errno("getifaddrs", "listing this host's addresses");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, &::freeifaddrs);
  std::vector<std::string> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next)
    if (a->ifa_addr != nullptr && (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
      out.push_back(scoped_address_text(a->ifa_addr, a->ifa_name));
  return out;
}

}  // namespace hvrun

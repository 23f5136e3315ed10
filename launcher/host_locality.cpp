#include "launcher/host_locality.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "agent/error.hpp"

namespace hvrun {

namespace {

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::set<std::string> own_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw_errno("getifaddrs", "finding this machine's addresses");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> guard(list, &::freeifaddrs);
  std::set<std::string> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next)
    if (a->ifa_addr != nullptr && (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
      out.insert(address_text(a->ifa_addr));
  return out;
}

bool is_loopback_name(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "::1" || name == "[::1]";
}

}  // namespace

std::vector<bool> find_local_hosts(const std::vector<std::string>& names, std::chrono::milliseconds timeout) {
  std::vector<bool> local(names.size(), false);
  char self[256] = {};
  if (::gethostname(self, sizeof self - 1) != 0) throw_errno("gethostname");

  // Requests for the names that need resolving; gaicb structures must stay put until they finish.
  std::vector<std::size_t> pending;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (is_loopback_name(names[i]) || names[i] == self)
      local[i] = true;
    else
      pending.push_back(i);
  }
  if (pending.empty()) return local;

  // The requests live on the heap: a name still resolving at the deadline belongs to glibc's
  // resolver thread, which may write into its request later, so that request is left to it.
  struct Requests {
    addrinfo hints{};
    std::vector<std::string> names;
    std::vector<gaicb> gai;
  };
  auto* reqs = new Requests;
  reqs->hints.ai_family = AF_UNSPEC;
  reqs->hints.ai_socktype = SOCK_STREAM;
  for (std::size_t i : pending) reqs->names.push_back(names[i]);
  reqs->gai.resize(pending.size());
  std::vector<gaicb*> list(pending.size());
  for (std::size_t k = 0; k < pending.size(); ++k) {
    reqs->gai[k] = gaicb{};
    reqs->gai[k].ar_name = reqs->names[k].c_str();
    reqs->gai[k].ar_request = &reqs->hints;
    list[k] = &reqs->gai[k];
  }
  auto& requests = reqs->gai;
  if (int rc = ::getaddrinfo_a(GAI_NOWAIT, list.data(), static_cast<int>(list.size()), nullptr); rc != 0) {
    delete reqs;
    throw Error(std::string("getaddrinfo_a failed (resolving the host list): ") + ::gai_strerror(rc));
  }

  const auto own = own_addresses();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t done = 0;
  std::vector<bool> finished(pending.size(), false);
  while (done < pending.size()) {
    for (std::size_t k = 0; k < pending.size(); ++k) {
      if (finished[k] || ::gai_error(&requests[k]) == EAI_INPROGRESS) continue;
      finished[k] = true;
      ++done;
      if (::gai_error(&requests[k]) != 0) continue;
      for (addrinfo* ai = requests[k].ar_result; ai != nullptr; ai = ai->ai_next)
        if (own.count(address_text(ai->ai_addr)) != 0) local[pending[k]] = true;
      ::freeaddrinfo(requests[k].ar_result);
      requests[k].ar_result = nullptr;
    }
    if (done == pending.size()) break;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    std::vector<const gaicb*> waiting;
    for (std::size_t k = 0; k < pending.size(); ++k)
      if (!finished[k]) waiting.push_back(&requests[k]);
    ::gai_suspend(waiting.data(), static_cast<int>(waiting.size()), &ts);
  }
  bool all_finished = done == pending.size();
  for (std::size_t k = 0; k < pending.size(); ++k)
    if (!finished[k] && ::gai_cancel(&requests[k]) == EAI_NOTCANCELED) all_finished = false;
  if (all_finished) delete reqs;  // else deliberately left to the resolver thread (a few hundred bytes)
  return local;
}

}  // namespace hvrun

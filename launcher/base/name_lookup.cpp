#include "launcher/base/name_lookup.hpp"

#include <signal.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <utility>

namespace hvrun {

// The request, shared by the waiter and glibc's completion notification: a waiter that gives up at
// its deadline can leave, and the last owner frees the request.
struct NameLookup::Shared {
  std::string node, service;
  addrinfo hints{};
  gaicb request{};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ~Shared() {
    if (request.ar_result != nullptr) ::freeaddrinfo(request.ar_result);
  }
};

namespace {
void lookup_done(sigval value) {
  std::unique_ptr<std::shared_ptr<NameLookup::Shared>> owner(
      static_cast<std::shared_ptr<NameLookup::Shared>*>(value.sival_ptr));
  NameLookup::Shared& shared = **owner;
  std::lock_guard lock(shared.mu);
  shared.done = true;
  shared.cv.notify_all();
}
}  // namespace

NameLookup::NameLookup(const std::string& host, const std::string& service) {
  addrinfo numeric_hints{};
  numeric_hints.ai_family = AF_UNSPEC;
  numeric_hints.ai_socktype = SOCK_STREAM;
  numeric_hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* numeric = nullptr;
  if (::getaddrinfo(host.c_str(), service.empty() ? nullptr : service.c_str(), &numeric_hints, &numeric) == 0) {
    immediate_.addresses.reset(numeric);
    answered_ = true;
    return;
  }

  auto shared = std::make_shared<Shared>();
  shared->node = host;
  shared->service = service;
  shared->hints.ai_family = AF_UNSPEC;
  shared->hints.ai_socktype = SOCK_STREAM;
  shared->hints.ai_flags = AI_NUMERICSERV;  // not AI_ADDRCONFIG: it hides 127.0.0.1 on a host with only lo
  shared->request.ar_name = shared->node.c_str();
  shared->request.ar_service = shared->service.empty() ? nullptr : shared->service.c_str();
  shared->request.ar_request = &shared->hints;

  auto* notify_owner = new std::shared_ptr<Shared>(shared);
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD;
  event.sigev_notify_function = lookup_done;
  event.sigev_value.sival_ptr = notify_owner;
  gaicb* requests[] = {&shared->request};
  if (const int rc = ::getaddrinfo_a(GAI_NOWAIT, requests, 1, &event); rc != 0) {
    delete notify_owner;  // not queued: no notification will come
    immediate_.error = std::string("getaddrinfo_a: ") + ::gai_strerror(rc);
    answered_ = true;
    return;
  }
  shared_ = std::move(shared);
}

NameLookup::~NameLookup() = default;
NameLookup::NameLookup(NameLookup&&) noexcept = default;
NameLookup& NameLookup::operator=(NameLookup&&) noexcept = default;

NameLookup::Result NameLookup::wait(std::chrono::steady_clock::time_point deadline) {
  if (answered_) return std::move(immediate_);
  std::unique_lock lock(shared_->mu);
  if (!shared_->cv.wait_until(lock, deadline, [&] { return shared_->done; }))
    return {nullptr, "no answer from the resolver in time"};
  const int rc = ::gai_error(&shared_->request);
  if (rc != 0) {
    std::string detail = ::gai_strerror(rc);
    if (rc == EAI_SYSTEM) detail += std::string(": ") + std::strerror(errno);
    return {nullptr, detail};
  }
  AddrInfoList list(std::exchange(shared_->request.ar_result, nullptr));
  if (!list) return {nullptr, "no addresses"};
  return {std::move(list), {}};
}

}  // namespace hvrun

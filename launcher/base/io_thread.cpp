#include "launcher/base/io_thread.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "common/error.hpp"
#include "common/invariant.hpp"

namespace hvrun {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kMaxEvents = 256;
constexpr std::uint64_t kWakeId = 0;
// epoll's user data: the slot's id and which of its descriptors.
std::uint64_t tag(std::uint64_t id, std::size_t index) { return id * IoWant::kMaxFds + index; }

std::uint32_t epoll_events(short events) {
  std::uint32_t out = 0;
  if (events & POLLIN) out |= EPOLLIN;
  if (events & POLLOUT) out |= EPOLLOUT;
  return out;
}

}  // namespace

struct IoThread::Slot {
  IoClient* client = nullptr;
  std::uint64_t id = 0;
  std::array<int, IoWant::kMaxFds> fd{-1, -1, -1};  // registered with epoll
  std::array<std::uint32_t, IoWant::kMaxFds> events{};
  Clock::time_point deadline = Clock::time_point::max();
};

struct IoThread::State {
  std::uint64_t next_id = 1;  // tag() of id 0 is the wake-up eventfd's
  std::unordered_map<std::uint64_t, Slot> slots;
  std::unordered_map<IoClient*, std::uint64_t> ids;
  std::set<std::pair<Clock::time_point, std::uint64_t>> deadlines;
};

std::shared_ptr<IoThread> IoThread::get() {
  static std::mutex mu;
  static std::weak_ptr<IoThread> current;
  std::lock_guard lock(mu);
  if (auto thread = current.lock()) return thread;
  std::shared_ptr<IoThread> thread(new IoThread());
  current = thread;
  return thread;
}

IoThread::IoThread()
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)), wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), state_(new State) {
  if (!epoll_) throw_errno("epoll_create1", "the launcher's I/O thread");
  if (!wake_) throw_errno("eventfd", "the launcher's I/O thread");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag(kWakeId, 0);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0)
    throw_errno("epoll_ctl(EPOLL_CTL_ADD)", "the launcher's I/O thread");
  // Signals go to the other threads (the event loop handles SIGINT and SIGTERM): block them all here.
  sigset_t all, previous;
  sigfillset(&all);
  if (const int err = ::pthread_sigmask(SIG_SETMASK, &all, &previous); err != 0) {
    errno = err;
    throw_errno("pthread_sigmask", "starting the launcher's I/O thread");
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw;
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::pthread_setname_np(thread_.native_handle(), "hvrun-io");
}

IoThread::~IoThread() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  std::uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

void IoThread::attach(IoClient& client) {
  {
    std::lock_guard lock(mu_);
    to_attach_.push_back(&client);
    live_.push_back(&client);
  }
  // Not checked: the eventfd is ours, so the only failure is EAGAIN, a wake-up already pending; and a
  // throw here would leave the client queued while its constructor unwinds.
  std::uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof one);
}

void IoThread::detach(IoClient& client) {
  HVRUN_INVARIANT(std::this_thread::get_id() != thread_.get_id());
  std::unique_lock lock(mu_);
  if (std::find(live_.begin(), live_.end(), &client) == live_.end()) return;
  to_detach_.push_back(&client);
  std::uint64_t one = 1;
  (void)::write(wake_.get(), &one, sizeof one);  // EAGAIN only if a wake-up is pending anyway
  detached_.wait(lock, [&] { return std::find(live_.begin(), live_.end(), &client) == live_.end(); });
  // It may have finished by itself before the thread saw the request: the address may be reused.
  std::erase(to_detach_, &client);
}

std::size_t IoThread::clients() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

void IoThread::apply_requests() {
  std::vector<IoClient*> attach, detach;
  {
    std::lock_guard lock(mu_);
    attach.swap(to_attach_);
    detach.swap(to_detach_);
  }
  for (IoClient* client : detach) {
    if (auto pending = std::find(attach.begin(), attach.end(), client); pending != attach.end()) {
      attach.erase(pending);
      std::lock_guard lock(mu_);
      std::erase(live_, client);
    } else if (auto it = state_->ids.find(client); it != state_->ids.end()) {
      drop(it->second, {}, /*finished=*/false);
    }
  }
  if (!detach.empty()) detached_.notify_all();
  for (IoClient* client : attach) {
    const std::uint64_t id = state_->next_id++;
    Slot& slot = state_->slots[id];
    slot.client = client;
    slot.id = id;
    state_->ids[client] = id;
    service(slot);
  }
}

// Stops watching the slot's descriptors (they are still open: see IoClient::finish).
void IoThread::unwatch(Slot& slot) {
  for (std::size_t i = 0; i < IoWant::kMaxFds; ++i) {
    if (slot.fd[i] >= 0) (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, slot.fd[i], nullptr);
    slot.fd[i] = -1;
    slot.events[i] = 0;
  }
}

// Forgets a slot; a client that ended by itself (or failed) hears finish() first. Then its owner's
// detach() may return.
void IoThread::drop(std::uint64_t id, const std::string& failure, bool finished) {
  auto it = state_->slots.find(id);
  HVRUN_INVARIANT(it != state_->slots.end());
  Slot& slot = it->second;
  IoClient* client = slot.client;
  unwatch(slot);
  state_->deadlines.erase({slot.deadline, id});
  state_->ids.erase(client);
  state_->slots.erase(it);
  if (finished) client->finish(failure);
  {
    std::lock_guard lock(mu_);
    std::erase(live_, client);
  }
  detached_.notify_all();
}

void IoThread::service(Slot& slot) {
  IoWant want;
  try {
    want = slot.client->service();
  } catch (const std::exception& e) {
    drop(slot.id, std::string("internal error in the I/O thread: ") + e.what(), true);
    return;
  }
  if (want.done) {
    drop(slot.id, {}, true);
    return;
  }
  for (std::size_t i = 0; i < IoWant::kMaxFds; ++i) {
    const int fd = want.events[i] != 0 ? want.fd[i] : -1;
    const std::uint32_t events = fd >= 0 ? epoll_events(want.events[i]) : 0;
    if (fd == slot.fd[i] && events == slot.events[i]) continue;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag(slot.id, i);
    int rc = 0;
    const char* call = "epoll_ctl";
    if (fd == slot.fd[i]) {
      rc = ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
      call = "epoll_ctl(EPOLL_CTL_MOD)";
    } else {
      if (slot.fd[i] >= 0) (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, slot.fd[i], nullptr);
      slot.fd[i] = -1;
      slot.events[i] = 0;
      if (fd >= 0) {
        rc = ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
        call = "epoll_ctl(EPOLL_CTL_ADD)";
      }
    }
    if (rc != 0) {
      drop(slot.id, std::string(call) + " failed: " + std::strerror(errno) + " (descriptor " + std::to_string(fd) + ")",
           true);
      return;
    }
    slot.fd[i] = fd;
    slot.events[i] = events;
  }
  if (want.deadline != slot.deadline) {
    state_->deadlines.erase({slot.deadline, slot.id});
    slot.deadline = want.deadline;
    if (slot.deadline != Clock::time_point::max()) state_->deadlines.insert({slot.deadline, slot.id});
  }
}

void IoThread::run() {
  std::array<epoll_event, kMaxEvents> events;
  std::vector<std::uint64_t> ready;
  for (;;) {
    apply_requests();
    {
      std::lock_guard lock(mu_);
      if (stopping_ && live_.empty() && to_attach_.empty()) return;
    }
    int timeout_ms = -1;
    if (!state_->deadlines.empty()) {
      const auto wait = state_->deadlines.begin()->first - Clock::now();
      timeout_ms = static_cast<int>(
          std::clamp<long long>(std::chrono::ceil<std::chrono::milliseconds>(wait).count(), 0, 60'000));
    }
    const int n = ::epoll_wait(epoll_.get(), events.data(), kMaxEvents, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Cannot happen with a valid epoll descriptor and buffer; a fault here would stall every host.
      spdlog::error("epoll_wait failed in the launcher's I/O thread: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    ready.clear();
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64 / IoWant::kMaxFds;
      if (id == kWakeId) {
        std::uint64_t count;
        (void)::read(wake_.get(), &count, sizeof count);
        continue;
      }
      ready.push_back(id);
    }
    const auto now = Clock::now();
    for (auto it = state_->deadlines.begin(); it != state_->deadlines.end() && it->first <= now; ++it)
      ready.push_back(it->second);
    std::sort(ready.begin(), ready.end());
    ready.erase(std::unique(ready.begin(), ready.end()), ready.end());
    for (std::uint64_t id : ready) {
      // A slot dropped earlier in this round (or detached) is gone; ids are never reused.
      if (auto it = state_->slots.find(id); it != state_->slots.end()) service(it->second);
    }
  }
}

}  // namespace hvrun

#include "launcher/ssh/ssh_core.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.hpp"

namespace hvrun::ssh_detail {

namespace {

void log_from_libssh(int priority, const char* function, const char* message, void*) {
  if (priority <= SSH_LOG_WARN) {
    log_of(LogSubsys::kSsh).debug("libssh: {}: {}", function, message);
  } else {
    log_of(LogSubsys::kSsh).trace("libssh: {}: {}", function, message);
  }
}

// Refuses every passphrase request. Without a callback libssh lets OpenSSL read one from the terminal
// (PEM keys); hvrun never prompts, so an encrypted key that ssh-agent does not hold is skipped.
int refuse_passphrase(const char*, char*, size_t, int, int, void*) { return -1; }

}  // namespace

void init_libssh() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (ssh_init() != SSH_OK) throw Error("ssh_init failed: cannot initialise libssh (its crypto backend)");
    ssh_set_log_callback(log_from_libssh);
    const LogLevel level = log_of(LogSubsys::kSsh).level();
    ssh_set_log_level(level <= spdlog::level::trace   ? SSH_LOG_PROTOCOL
                      : level <= spdlog::level::debug ? SSH_LOG_WARN
                                                      : SSH_LOG_NOLOG);
  });
}

void set_option(Core& core, ssh_options_e type, const void* value, const std::string& what) {
  if (ssh_options_set(core.session(), type, value) != SSH_OK) {
    throw core.error(SshFailure::kConfig, "cannot apply " + what + " (ssh_options_set: " + core.libssh_error() + ")");
  }
}

// --- Core -----------------------------------------------------------------------------------------

Core::Core(std::string host_name) : host(std::move(host_name)) {
  session_ = ssh_new();
  if (session_ == nullptr) throw SshError(SshFailure::kConfig, host, port, host + ": ssh_new failed (out of memory?)");
  callbacks_.userdata = this;
  callbacks_.auth_function = refuse_passphrase;
  ssh_callbacks_init(&callbacks_);
  if (ssh_set_callbacks(session_, &callbacks_) != SSH_OK) {
    ssh_free(session_);
    throw SshError(SshFailure::kConfig, host, port, host + ": ssh_set_callbacks failed");
  }
  ssh_set_counters(session_, &socket_counter, &packet_counter);
  last_received = Clock::now();
}

Core::~Core() {
  std::lock_guard lock(mu);
  // Nonblocking: a DISCONNECT to a dead peer must not wait. ssh_disconnect closes the socket (connect()
  // hands the descriptor to libssh for good), ssh_free releases the rest.
  ssh_set_blocking(session_, 0);
  ssh_disconnect(session_);
  ssh_free(session_);
}

SshError Core::error(SshFailure failure, const std::string& what) const {
  return SshError(failure, host, port, host + ": " + what);
}

std::string Core::libssh_error() const {
  const char* text = ssh_get_error(session_);
  return text != nullptr && *text != '\0' ? text : "unknown libssh error";
}

void Core::throw_if_lost() const {
  if (!lost.empty()) throw SshError(SshFailure::kConnectionLost, host, port, lost);
}

// --- SessionLock ----------------------------------------------------------------------------------

SessionLock::SessionLock(Core& core, bool nonblocking, int own_waiter_fd)
    : core_(core),
      lock_(core.mu),
      own_waiter_fd_(own_waiter_fd),
      packets_before_(core.packet_counter.in_packets),
      bytes_before_(core.socket_counter.in_bytes) {
  if (nonblocking) ssh_set_blocking(core_.session(), 0);
}

SessionLock::SessionLock(Core& core, bool nonblocking, int own_waiter_fd, std::try_to_lock_t)
    : core_(core), lock_(core.mu, std::try_to_lock), own_waiter_fd_(own_waiter_fd) {
  if (!lock_.owns_lock()) return;
  packets_before_ = core.packet_counter.in_packets;
  bytes_before_ = core.socket_counter.in_bytes;
  if (nonblocking) ssh_set_blocking(core_.session(), 0);
}

SessionLock::~SessionLock() {
  if (!lock_.owns_lock()) return;
  ssh_set_blocking(core_.session(), 1);
  if (core_.socket_counter.in_bytes != bytes_before_) core_.last_received = Clock::now();
  if (core_.packet_counter.in_packets != packets_before_) {
    for (int fd : core_.waiters) {
      if (fd == own_waiter_fd_) continue;
      std::uint64_t one = 1;
      (void)::write(fd, &one, sizeof one);  // EAGAIN only if already signalled
    }
  }
}

// --- Waiter ---------------------------------------------------------------------------------------

Waiter::Waiter(Core& core) : core_(core), fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!fd_) throw_errno("eventfd", "wake-up for the SSH connection to " + core.host);
  std::lock_guard lock(core_.mu);
  core_.waiters.push_back(fd_.get());
}

Waiter::~Waiter() {
  std::lock_guard lock(core_.mu);
  std::erase(core_.waiters, fd_.get());
}

void Waiter::notify() const {
  std::uint64_t one = 1;
  (void)::write(fd_.get(), &one, sizeof one);
}

void Waiter::drain() const {
  std::uint64_t count;
  (void)::read(fd_.get(), &count, sizeof count);
}

// --- Channel --------------------------------------------------------------------------------------

Channel::Channel(Core& core) : core_(core) {}

std::unique_ptr<Channel> Channel::exec(Core& core, const std::string& command) {
  std::unique_ptr<Channel> self(new Channel(core));
  SessionLock lock(core, /*nonblocking=*/false);
  core.throw_if_lost();
  auto fail = [&](const std::string& call) -> SshError {
    if (ssh_is_connected(core.session()) == 0) {
      return core.error(SshFailure::kConnectionLost, "connection lost (" + call + ": " + core.libssh_error() + ")");
    }
    return core.error(SshFailure::kChannel,
                      "cannot start '" + command + "' (" + call + ": " + core.libssh_error() + ")");
  };
  self->channel_ = ssh_channel_new(core.session());
  if (self->channel_ == nullptr) throw fail("ssh_channel_new");
  if (ssh_channel_open_session(self->channel_) != SSH_OK) throw fail("ssh_channel_open_session");
  self->callbacks_.userdata = self.get();
  self->callbacks_.channel_exit_status_function = on_exit_status;
  self->callbacks_.channel_exit_signal_function = on_exit_signal;
  ssh_callbacks_init(&self->callbacks_);
  if (ssh_set_channel_callbacks(self->channel_, &self->callbacks_) != SSH_OK) {
    throw fail("ssh_set_channel_callbacks");
  }
  if (ssh_channel_request_exec(self->channel_, command.c_str()) != SSH_OK) {
    throw fail("ssh_channel_request_exec");
  }
  return self;
}

Channel::~Channel() {
  if (channel_ == nullptr) return;
  SessionLock lock(core_, /*nonblocking=*/true);
  ssh_remove_channel_callbacks(channel_, &callbacks_);
  if (ssh_channel_is_open(channel_) != 0) (void)ssh_channel_close(channel_);
  ssh_channel_free(channel_);
}

bool Channel::exited() const {
  std::lock_guard lock(mu_);
  return exited_;
}

std::optional<int> Channel::exit_status() const {
  std::lock_guard lock(mu_);
  return exit_status_;
}

std::string Channel::exit_signal() const {
  std::lock_guard lock(mu_);
  return exit_signal_;
}

void Channel::on_exit_status(ssh_session, ssh_channel, int status, void* self) {
  auto* channel = static_cast<Channel*>(self);
  std::lock_guard lock(channel->mu_);
  channel->exit_status_ = status;
  channel->exited_ = true;
}

void Channel::on_exit_signal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                             void* self) {
  auto* channel = static_cast<Channel*>(self);
  std::lock_guard lock(channel->mu_);
  channel->exit_signal_ = signal != nullptr ? signal : "?";
  channel->exited_ = true;
}

}  // namespace hvrun::ssh_detail

#include "launcher/ssh/ssh_session.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "launcher/ssh/sftp_upload.hpp"
#include "launcher/ssh/ssh_auth.hpp"
#include "launcher/ssh/ssh_core.hpp"
#include "launcher/ssh/ssh_dial.hpp"
#include "launcher/ssh/ssh_host_key.hpp"
#include "launcher/ssh/ssh_run.hpp"

namespace hvrun {

using ssh_detail::Channel;
using ssh_detail::Clock;
using ssh_detail::Core;

SshError::SshError(SshFailure failure, std::string host, int port, const std::string& message)
    : Error(message), failure_(failure), host_(std::move(host)), port_(port) {}

// --- SshSession -----------------------------------------------------------------------------------

SshSession::SshSession(std::shared_ptr<Core> core) : core_(std::move(core)) {}
SshSession::SshSession(SshSession&&) noexcept = default;
SshSession& SshSession::operator=(SshSession&&) noexcept = default;
SshSession::~SshSession() = default;

const std::string& SshSession::host() const { return core_->host; }
const std::string& SshSession::hostname() const { return core_->hostname; }
int SshSession::port() const { return core_->port; }
const std::string& SshSession::user() const { return core_->user; }

SshSession SshSession::connect(const SshTarget& target) {
  ssh_detail::init_libssh();
  if (target.host.empty()) throw UsageError("ssh: empty host name");
  if (target.port && (*target.port <= 0 || *target.port > 65535)) {
    throw UsageError("-p: '" + std::to_string(*target.port) + "' is not a TCP port (1-65535)");
  }
  if (target.connect_timeout.count() <= 0) throw UsageError("ssh connect timeout must be positive");
  auto core = std::make_shared<Core>(target.host);
  core->keepalive_interval = std::max(target.keepalive_interval, std::chrono::milliseconds(1));
  core->keepalive_count_max = std::max(target.keepalive_count_max, 1);
  core->port = target.port.value_or(22);
  core->hostname = target.host;
  // The core is not shared yet: no other thread can reach it, so no lock until it is returned.
  const ssh_detail::DialedSession dialed = ssh_detail::dial_session(*core, target);
  ssh_detail::verify_host_key(*core, dialed.host_key_policy, dialed.host_key_alias);
  ssh_detail::authenticate(*core);
  core->last_received = Clock::now();
  log_of(LogSubsys::kSsh)
      .debug("{}: connected to {} port {} as {}", core->host, dialed.address, core->port, core->user);
  return SshSession(std::move(core));
}

RunResult SshSession::run(const std::string& command, std::chrono::milliseconds timeout) {
  return ssh_detail::run_command(*core_, command, timeout);
}

SshExec SshSession::exec(const std::string& command) {
  return SshExec::start(core_, Channel::exec(*core_, command));
}

void SshSession::upload(const std::string& local_path, const std::string& remote_path, std::uint32_t mode,
                        std::chrono::milliseconds timeout) {
  ssh_detail::upload_files(*core_, {FileCopy{local_path, remote_path, mode}}, 0700, timeout, {});
}

void SshSession::upload_files(const std::vector<FileCopy>& files, std::uint32_t directory_mode,
                              std::chrono::milliseconds timeout, const std::function<void(std::uint64_t)>& copied) {
  ssh_detail::upload_files(*core_, files, directory_mode, timeout, copied);
}

}  // namespace hvrun

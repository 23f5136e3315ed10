#include "launcher/ssh/sftp_upload.hpp"

#include <fcntl.h>
#include <libssh/sftp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <random>
#include <set>
#include <utility>
#include <stop_token>
#include <thread>
#include <vector>

#include "common/checked_directory.hpp"
#include "common/duration_text.hpp"
#include "common/io_sizes.hpp"
#include "common/log.hpp"

namespace hvrun::ssh_detail {

namespace {

// Shuts the connection's socket down if `deadline` passes before the watchdog is destroyed: libssh's
// SFTP calls retry reads forever, and a socket shut down is the one thing that makes them return.
class Watchdog {
 public:
  Watchdog(UniqueFd socket, Clock::time_point deadline)
      : socket_(std::move(socket)), thread_([this, deadline](std::stop_token stop) {
          std::unique_lock lock(mu_);
          if (cv_.wait_until(lock, stop, deadline, [] { return false; }) || stop.stop_requested()) return;
          fired_ = true;
          ::shutdown(socket_.get(), SHUT_RDWR);
        }) {}
  ~Watchdog() {
    thread_.request_stop();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  UniqueFd socket_;  // a dup of the session's socket: shutdown() reaches the socket even if libssh closed its fd
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool fired_ = false;
  std::jthread thread_;
};

struct SftpSessionFree {
  void operator()(sftp_session sftp) const { sftp_free(sftp); }
};
struct SftpFileClose {
  void operator()(sftp_file file) const { sftp_close(file); }
};
struct SftpAttributesFree {
  void operator()(sftp_attributes attributes) const { sftp_attributes_free(attributes); }
};
using SftpSession = std::unique_ptr<sftp_session_struct, SftpSessionFree>;
using SftpFile = std::unique_ptr<sftp_file_struct, SftpFileClose>;
using SftpAttributes = std::unique_ptr<sftp_attributes_struct, SftpAttributesFree>;

const char* sftp_error_text(int code) {
  switch (code) {
    case SSH_FX_OK: return "ok";
    case SSH_FX_EOF: return "end of file";
    case SSH_FX_NO_SUCH_FILE: return "no such file";
    case SSH_FX_PERMISSION_DENIED: return "permission denied";
    case SSH_FX_FAILURE: return "failure";
    case SSH_FX_BAD_MESSAGE: return "bad message";
    case SSH_FX_NO_CONNECTION: return "no connection";
    case SSH_FX_CONNECTION_LOST: return "connection lost";
    case SSH_FX_OP_UNSUPPORTED: return "operation unsupported";
    case SSH_FX_INVALID_HANDLE: return "invalid handle";
    case SSH_FX_NO_SUCH_PATH: return "no such path";
    case SSH_FX_FILE_ALREADY_EXISTS: return "file already exists";
    case SSH_FX_WRITE_PROTECT: return "write-protected";
    case SSH_FX_NO_MEDIA: return "no media";
    default: return "unknown SFTP error";
  }
}

// One SFTP session's uploads: names for messages, and the SFTP calls with their checks. `file()` selects
// the file being copied; messages name it.
class Upload {
 public:
  Upload(Core& core, std::uint32_t directory_mode) : core_(core), directory_mode_(directory_mode) {}

  void file(std::string local, std::string remote) {
    local_ = std::move(local);
    remote_ = std::move(remote);
  }

  SshError fail(const std::string& step) const {
    if (ssh_is_connected(core_.session()) == 0) {
      return core_.error(SshFailure::kConnectionLost, "connection lost during upload of " + local_ + " to " + remote_ +
                                                          " (" + core_.libssh_error() + ")");
    }
    std::string detail = step;
    if (sftp_ && sftp_get_error(sftp_.get()) != SSH_FX_OK)
      detail += ": " + std::string(sftp_error_text(sftp_get_error(sftp_.get())));
    if (const std::string libssh = core_.libssh_error(); !libssh.empty() && libssh != "unknown libssh error")
      detail += "; libssh: " + libssh;
    return core_.error(SshFailure::kFileTransfer, "upload of " + local_ + " to " + remote_ + " failed (" + detail + ")");
  }

  // A refusal that is no SFTP call's failure: what is in the way, and nothing else.
  SshError refuse(const std::string& why) const {
    return core_.error(SshFailure::kFileTransfer, "upload of " + local_ + " to " + remote_ + " failed (" + why + ")");
  }

  void start() {
    sftp_.reset(sftp_new(core_.session()));
    if (!sftp_) throw fail("sftp_new");
    if (sftp_init(sftp_.get()) != SSH_OK) throw fail("sftp_init");
  }

  SftpAttributes lstat(const std::string& path) { return SftpAttributes(sftp_lstat(sftp_.get(), path.c_str())); }
  SftpAttributes stat(const std::string& path) { return SftpAttributes(sftp_stat(sftp_.get(), path.c_str())); }

  // The uid the SFTP server runs as on the host (its effective uid), which owns what it makes: read from
  // its /proc/self/status, since SFTP itself never says.
  void learn_user() {
    SftpFile status(sftp_open(sftp_.get(), "/proc/self/status", O_RDONLY, 0));
    if (!status) throw fail("sftp_open /proc/self/status, to learn the uid the upload runs as");
    std::string text(8192, '\0');
    const ssize_t n = sftp_read(status.get(), text.data(), text.size());
    if (n <= 0) throw fail("sftp_read /proc/self/status, to learn the uid the upload runs as");
    text.resize(static_cast<std::size_t>(n));
    unsigned long real = 0, effective = 0;
    const auto at = text.find("\nUid:");
    if (at == std::string::npos || std::sscanf(text.c_str() + at, "\nUid: %lu %lu", &real, &effective) != 2)
      throw refuse("the host's /proc/self/status holds no Uid line: the uid the upload runs as is unknown");
    user_ = static_cast<uid_t>(effective);
    unsigned long real_gid = 0, effective_gid = 0;
    const auto gid_at = text.find("\nGid:");
    if (gid_at == std::string::npos ||
        std::sscanf(text.c_str() + gid_at, "\nGid: %lu %lu", &real_gid, &effective_gid) != 2)
      throw refuse("the host's /proc/self/status holds no Gid line: the group the upload runs as is unknown");
    group_ = static_cast<gid_t>(effective_gid);
  }

  // `dir` as a directory hvrun may write in (common/checked_directory.hpp's rule, on the host): made
  // when missing; a link only when it is the user's or root's, and then what it names is checked.
  void check_directory(const std::string& dir) {
    auto attributes = lstat(dir);
    if (!attributes) {
      if (sftp_mkdir(sftp_.get(), dir.c_str(), static_cast<mode_t>(directory_mode_)) != 0 && !lstat(dir))
        throw fail("sftp_mkdir " + dir);
      attributes = lstat(dir);  // made, by this upload or another launcher's meanwhile: checked all the same
      if (!attributes) throw fail("sftp_lstat " + dir);
    }
    if (attributes->type == SSH_FILEXFER_TYPE_SYMLINK) {
      if (const std::string why = link_refusal(dir, attributes->uid, user_, false); !why.empty()) throw refuse(why);
      attributes = stat(dir);
      if (!attributes) throw fail("sftp_stat " + dir);
    }
    if (attributes->type != SSH_FILEXFER_TYPE_DIRECTORY) throw refuse(dir + " exists and is not a directory");
    // The host's group database is not at hand: a group-writable directory passes only in the user's own
    // primary group numbered as the user (useradd's user private group), never a shared one.
    const auto private_group = [this](gid_t g) { return g == group_ && static_cast<uid_t>(g) == user_; };
    if (const std::string why = directory_refusal(dir, attributes->uid, attributes->gid, attributes->permissions, user_,
                                                  false, private_group);
        !why.empty())
      throw refuse(why);
  }

  // Every directory of the file's path from the root, each looked at once per session: the temporary
  // file is made, its mode set and renamed by name, safe only where no one else can change the names.
  void make_parents() {
    auto slash = remote_.rfind('/');
    if (slash == std::string::npos || slash == 0) return;
    const std::string parent = remote_.substr(0, slash);
    for (std::size_t end = parent.find('/', 1); ; end = parent.find('/', end + 1)) {
      std::string prefix = parent.substr(0, end);
      if (!prefix.empty() && prefix.back() != '/' && known_directories_.insert(prefix).second) check_directory(prefix);
      if (end == std::string::npos) break;
    }
  }

  void write_temporary(int local_fd, const std::string& temporary, std::uint32_t mode) {
    SftpFile file(sftp_open(sftp_.get(), temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
    if (!file) throw fail("sftp_open " + temporary);
    created_ = temporary;
    std::vector<char> buffer(kIoChunk);
    for (;;) {
      ssize_t n = ::read(local_fd, buffer.data(), buffer.size());
      if (n == -1 && errno == EINTR) continue;
      if (n == -1) throw_errno("read", local_ + " (upload to " + core_.host + ")");
      if (n == 0) break;
      ssize_t written = sftp_write(file.get(), buffer.data(), static_cast<size_t>(n));
      if (written != n) throw fail("sftp_write " + temporary);
    }
    if (sftp_extension_supported(sftp_.get(), "fsync@openssh.com", "1") != 0 && sftp_fsync(file.get()) != 0) {
      throw fail("sftp_fsync " + temporary);
    }
    if (sftp_close(file.release()) != 0) throw fail("sftp_close " + temporary);
    // libssh has no fsetstat: the mode is set by name, on a name this upload made (O_EXCL, random) in a
    // directory check_directory found no one else can write in.
    if (sftp_chmod(sftp_.get(), temporary.c_str(), static_cast<mode_t>(mode)) != 0) {
      throw fail("sftp_chmod " + temporary);
    }
  }

  // SFTP v3 (OpenSSH's server) does not rename over an existing file: remove it and rename again.
  // What is at the file's name is replaced, never written through: a link there is refused, as is a
  // directory.
  void rename_into_place(const std::string& temporary) {
    if (auto there = lstat(remote_)) {
      if (there->type == SSH_FILEXFER_TYPE_SYMLINK)
        throw refuse(remote_ + " is a symbolic link: hvrun writes no file through a link; remove it");
      if (there->type != SSH_FILEXFER_TYPE_REGULAR) throw refuse(remote_ + " exists and is not a regular file; remove it");
    }
    if (sftp_rename(sftp_.get(), temporary.c_str(), remote_.c_str()) != 0) {
      if (!lstat(remote_)) throw fail("sftp_rename " + temporary + " " + remote_);
      if (sftp_unlink(sftp_.get(), remote_.c_str()) != 0) throw fail("sftp_unlink " + remote_);
      if (sftp_rename(sftp_.get(), temporary.c_str(), remote_.c_str()) != 0) {
        throw fail("sftp_rename " + temporary + " " + remote_);
      }
    }
    created_.clear();
  }

  void verify(off_t size, std::uint32_t mode) {
    auto attributes = lstat(remote_);
    if (!attributes) throw fail("sftp_lstat " + remote_);
    if (attributes->size != static_cast<std::uint64_t>(size) || (attributes->permissions & 07777) != mode) {
      char text[128];
      std::snprintf(text, sizeof text, "after the copy: %llu bytes mode %04o, expected %llu bytes mode %04o",
                    static_cast<unsigned long long>(attributes->size), attributes->permissions & 07777,
                    static_cast<unsigned long long>(size), mode);
      throw core_.error(SshFailure::kFileTransfer, "upload of " + local_ + " to " + remote_ + " failed (" + text + ")");
    }
  }

  // Removes a temporary file left by a failed upload (best effort).
  ~Upload() {
    if (!created_.empty() && sftp_ && ssh_is_connected(core_.session()) != 0) {
      (void)sftp_unlink(sftp_.get(), created_.c_str());
    }
  }

 private:
  Core& core_;
  std::uint32_t directory_mode_;
  std::string local_, remote_;
  SftpSession sftp_;
  std::string created_;  // the temporary file while it exists
  std::set<std::string> known_directories_;  // checked in this session
  uid_t user_ = 0;
  gid_t group_ = 0;
};

std::string random_suffix() {
  std::random_device random;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", random(), random());
  return text;
}

}  // namespace

namespace {

// The local file, open, checked to be a regular file; its size.
std::pair<UniqueFd, off_t> open_local(const std::string& host, const FileCopy& f) {
  if (f.remote_path.empty() || f.remote_path.back() == '/') {
    throw UsageError("upload to " + host + ": '" + f.remote_path + "' is not a file path");
  }
  UniqueFd local(::open(f.local_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!local) throw_errno("open", f.local_path + " (upload to " + host + ")");
  struct stat info{};
  if (::fstat(local.get(), &info) == -1) throw_errno("fstat", f.local_path + " (upload to " + host + ")");
  if (!S_ISREG(info.st_mode)) throw UsageError("upload to " + host + ": " + f.local_path + " is not a regular file");
  return {std::move(local), info.st_size};
}

}  // namespace

void upload_files(Core& core, const std::vector<FileCopy>& files, std::uint32_t directory_mode,
                  std::chrono::milliseconds timeout, const std::function<void(std::uint64_t)>& copied) {
  if (files.empty()) return;
  SessionLock lock(core, /*nonblocking=*/false);
  core.throw_if_lost();
  UniqueFd socket(::fcntl(ssh_get_fd(core.session()), F_DUPFD_CLOEXEC, 0));
  if (!socket) throw_errno("fcntl(F_DUPFD_CLOEXEC)", "watchdog for the upload to " + core.host);
  Watchdog watchdog(std::move(socket), Clock::now() + timeout);
  const FileCopy* current = &files.front();
  try {
    Upload upload(core, directory_mode);
    upload.start();
    upload.learn_user();
    for (const FileCopy& f : files) {
      current = &f;
      auto [local, size] = open_local(core.host, f);
      upload.file(f.local_path, f.remote_path);
      upload.make_parents();
      const std::string temporary = f.remote_path + ".tmp-" + random_suffix();
      upload.write_temporary(local.get(), temporary, f.mode);
      upload.rename_into_place(temporary);
      upload.verify(size, f.mode);
      log_of(LogSubsys::kSsh)
          .debug("{}: uploaded {} to {} ({} bytes, mode {:o})", core.host, f.local_path, f.remote_path,
                 static_cast<long long>(size), f.mode);
      if (copied) copied(static_cast<std::uint64_t>(size));
    }
  } catch (const SshError&) {
    if (!watchdog.fired()) throw;
    core.lost = core.host + ": connection closed after the upload of " + current->local_path + " did not finish within " +
                seconds_text(timeout) + " (port " + std::to_string(core.port) + ")";
    throw core.error(SshFailure::kCommandTimeout, "upload of " + current->local_path + " to " + current->remote_path +
                                                      " did not finish within " + seconds_text(timeout) + " (port " +
                                                      std::to_string(core.port) + ")");
  }
}

}  // namespace hvrun::ssh_detail

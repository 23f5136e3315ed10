#pragma once
// Directories and files hvrun writes on hosts that other users share (one /tmp, group-writable trees):
// a directory hvrun did not make is written in only when it is the user's or root's and no one else can
// write in it (root's sticky directories, /tmp, excepted); below such a directory each component is
// opened from its parent's descriptor with O_NOFOLLOW, so no link anyone put there is followed, and files
// are opened without following a link and checked on the open descriptor. Refusals are UsageErrors
// naming `flag` (the option, or what the directory is for), the path, its owner and mode, and what to do.
#include <sys/types.h>

#include <functional>
#include <string>

#include "common/unique_fd.hpp"

namespace hvrun {

// Whether no user but `user` can be in group `group` on this machine: a user private group (Debian's and
// Ubuntu's scheme, where umask 002 makes every new directory group-writable) whose only member, as
// primary or listed group, is `user`. OpenSSH's StrictModes on Debian allows the same.
bool group_is_private(gid_t group, uid_t user);
// Why a directory at `path` owned by `owner` and `group` with `mode` is none hvrun may write in for
// `user`; "" when it is. Group-writable passes when `private_group(group)` says only `user` can be in
// it. `names`: say owners' names from this machine's user database (false for another host's).
std::string directory_refusal(const std::string& path, uid_t owner, gid_t group, mode_t mode, uid_t user, bool names,
                              const std::function<bool(gid_t)>& private_group);
// The same with this machine's groups (group_is_private).
std::string directory_refusal(const std::string& path, uid_t owner, gid_t group, mode_t mode, uid_t user, bool names);
// What a symbolic link at `path` owned by `owner` may not be followed for; "" when it may (the user's or
// root's own link).
std::string link_refusal(const std::string& path, uid_t owner, uid_t user, bool names);

class CheckedDirectory {
 public:
  CheckedDirectory() = default;
  // `path`, made (its last component, `mode` less the umask) when missing and `make`, opened and checked.
  // The components of `path` above it are the user's choice and followed; `path` itself when a link only
  // when the link is the user's or root's.
  static CheckedDirectory open(const std::string& path, mode_t mode, const std::string& flag, bool make = true);

  // `relative` ("a/b/c") below this one, each component made with `mode` when missing, opened with
  // O_NOFOLLOW and checked as open's.
  CheckedDirectory below(const std::string& relative, mode_t mode) const;
  // A new directory here named `prefix` and six random characters, as mkdtemp(3) but from the descriptor.
  CheckedDirectory make_unique(const std::string& prefix, mode_t mode) const;
  // The file `name` here for writing, made with `mode` (less the umask) or, when it is there, emptied:
  // refused when it is a link, not a regular file, not the user's or has more than one name. `exclusive`:
  // refused when it is there at all.
  UniqueFd create_file(const std::string& name, mode_t mode, bool exclusive) const;
  // A file the user named with `flag` (--report, --events): its directory opened as open() does (not
  // made), the file made or emptied there as create_file does.
  static UniqueFd create_file_at(const std::string& path, mode_t mode, const std::string& flag);

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  CheckedDirectory(UniqueFd fd, std::string path, std::string flag)
      : fd_(std::move(fd)), path_(std::move(path)), flag_(std::move(flag)) {}
  CheckedDirectory child(const std::string& name, mode_t mode, bool must_be_new) const;
  [[noreturn]] void refuse(const std::string& why) const;

  UniqueFd fd_;
  std::string path_;
  std::string flag_;
};

}  // namespace hvrun

#include "common/checked_directory.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "common/error.hpp"
#include "common/job_secret.hpp"

namespace hvrun {

namespace {

std::string owner_text(uid_t uid, bool names) {
  std::string text = "uid " + std::to_string(uid);
  if (!names) return text;
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(4096);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    return std::string(found->pw_name) + " (" + text + ")";
  return text;
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// getrandom(2) through random_bytes: std::random_device would take arc4random from glibc 2.36, above the
// agent's documented 2.35.
std::string random_word() {
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string word;
  for (const char byte : random_bytes(6)) word += kLetters[static_cast<unsigned char>(byte) % (sizeof kLetters - 1)];
  return word;
}

}  // namespace

bool group_is_private(gid_t group, uid_t user) {
  // getpwent's walk is one cursor for the whole process: one walk at a time, each answer kept.
  static std::mutex mutex;
  static std::map<std::pair<gid_t, uid_t>, bool> known;
  const std::lock_guard lock(mutex);
  if (const auto it = known.find({group, user}); it != known.end()) return it->second;
  std::vector<char> buffer(16384);
  passwd user_entry{};
  passwd* user_found = nullptr;
  struct group group_entry{};
  ::group* group_found = nullptr;
  bool private_group = false;
  if (::getpwuid_r(user, &user_entry, buffer.data(), buffer.size() / 2, &user_found) == 0 && user_found != nullptr &&
      ::getgrgid_r(group, &group_entry, buffer.data() + buffer.size() / 2, buffer.size() / 2, &group_found) == 0 &&
      group_found != nullptr) {
    const std::string name = user_found->pw_name;
    bool member = user_found->pw_gid == group;
    private_group = true;
    for (char** m = group_found->gr_mem; *m != nullptr; ++m) {
      private_group = private_group && name == *m;
      member = member || name == *m;
    }
    std::vector<char> walk(4096);
    passwd entry{};
    passwd* found = nullptr;
    ::setpwent();
    while (private_group && ::getpwent_r(&entry, walk.data(), walk.size(), &found) == 0 && found != nullptr)
      private_group = found->pw_gid != group || found->pw_uid == user;
    ::endpwent();
    private_group = private_group && member;
  }
  known[{group, user}] = private_group;
  return private_group;
}

std::string directory_refusal(const std::string& path, uid_t owner, gid_t group, mode_t mode, uid_t user, bool names,
                              const std::function<bool(gid_t)>& private_group) {
  if (owner != user && owner != 0) {
    return path + " is owned by " + owner_text(owner, names) +
           ", not by you or root: hvrun writes only in directories that are yours; use another directory, or have "
           "its owner remove it and let hvrun make it";
  }
  const bool sticky_root = owner == 0 && (mode & S_ISVTX) != 0;
  const bool others_write = (mode & S_IWOTH) != 0 || ((mode & S_IWGRP) != 0 && !(owner == user && private_group(group)));
  if (others_write && !sticky_root) {
    return path + " has mode " + mode_text(mode) + ", writable by others than its owner: hvrun writes only in "
           "directories no one else can write in; run chmod go-w " + path + ", or use another directory";
  }
  return {};
}

std::string directory_refusal(const std::string& path, uid_t owner, gid_t group, mode_t mode, uid_t user, bool names) {
  return directory_refusal(path, owner, group, mode, user, names,
                           [user](gid_t g) { return group_is_private(g, user); });
}

std::string link_refusal(const std::string& path, uid_t owner, uid_t user, bool names) {
  if (owner == user || owner == 0) return {};
  return path + " is a symbolic link owned by " + owner_text(owner, names) + ": hvrun follows only links that are "
         "yours or root's; remove it, or name the directory it points to yourself";
}

void CheckedDirectory::refuse(const std::string& why) const { throw UsageError(flag_ + ": " + why); }

CheckedDirectory CheckedDirectory::open(const std::string& path, mode_t mode, const std::string& flag, bool make) {
  const CheckedDirectory none(UniqueFd(), path, flag);
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !make) none.refuse("cannot read '" + path + "': " + std::strerror(errno));
    if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
      none.refuse("cannot create directory '" + path + "': " + std::strerror(errno));
    if (::lstat(path.c_str(), &st) != 0) none.refuse("cannot read '" + path + "': " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    if (const std::string why = link_refusal(path, st.st_uid, ::geteuid(), true); !why.empty()) none.refuse(why);
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOTDIR) none.refuse(path + " exists and is not a directory; remove it or use another directory");
    none.refuse("cannot open directory '" + path + "': " + std::strerror(errno));
  }
  if (::fstat(fd.get(), &st) != 0) throw_errno("fstat", path);
  if (const std::string why = directory_refusal(path, st.st_uid, st.st_gid, st.st_mode, ::geteuid(), true); !why.empty())
    none.refuse(why);
  return CheckedDirectory(std::move(fd), path, flag);
}

CheckedDirectory CheckedDirectory::child(const std::string& name, mode_t mode, bool must_be_new) const {
  const std::string path = path_ + "/" + name;
  if (::mkdirat(fd_.get(), name.c_str(), mode) != 0) {
    if (errno != EEXIST) refuse("cannot create directory '" + path + "': " + std::strerror(errno));
    if (must_be_new) return {};
  }
  UniqueFd fd(::openat(fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st{};
  if (!fd) {
    const int error = errno;
    if (::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
      refuse(path + " is a symbolic link: hvrun follows no link below the directory it writes in; remove it");
    if (error == ENOTDIR) refuse(path + " exists and is not a directory; remove it or use another directory");
    refuse("cannot open directory '" + path + "': " + std::strerror(error));
  }
  if (::fstat(fd.get(), &st) != 0) throw_errno("fstat", path);
  if (const std::string why = directory_refusal(path, st.st_uid, st.st_gid, st.st_mode, ::geteuid(), true); !why.empty())
    refuse(why);
  return CheckedDirectory(std::move(fd), path, flag_);
}

CheckedDirectory CheckedDirectory::below(const std::string& relative, mode_t mode) const {
  CheckedDirectory at(UniqueFd(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0)), path_, flag_);
  if (!at) throw_errno("fcntl(F_DUPFD_CLOEXEC)", path_);
  for (std::size_t start = 0; start < relative.size();) {
    const std::size_t end = std::min(relative.find('/', start), relative.size());
    const std::string name = relative.substr(start, end - start);
    start = end + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") refuse("'" + relative + "' below " + path_ + " has a '..' component");
    at = at.child(name, mode, false);
  }
  return at;
}

CheckedDirectory CheckedDirectory::make_unique(const std::string& prefix, mode_t mode) const {
  for (int attempt = 0; attempt < 100; ++attempt)
    if (CheckedDirectory made = child(prefix + random_word(), mode, true)) return made;
  refuse("cannot create a new directory in " + path_ + ": 100 random names were taken");
}

UniqueFd CheckedDirectory::create_file_at(const std::string& path, mode_t mode, const std::string& flag) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return open(dir, 0755, flag, /*make=*/false)
      .create_file(path.substr(slash == std::string::npos ? 0 : slash + 1), mode, /*exclusive=*/false);
}

UniqueFd CheckedDirectory::create_file(const std::string& name, mode_t mode, bool exclusive) const {
  const std::string path = path_ + "/" + name;
  UniqueFd fd(::openat(fd_.get(), name.c_str(),
                       O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (exclusive ? O_EXCL : 0), mode));
  struct stat st{};
  if (!fd) {
    const int error = errno;
    if (::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(st.st_mode)) refuse(path + " is a symbolic link: hvrun writes no file through a link; remove it");
      if (!S_ISREG(st.st_mode)) refuse(path + " exists and is not a regular file; remove it");
    }
    refuse("cannot create '" + path + "': " + std::strerror(error));
  }
  if (::fstat(fd.get(), &st) != 0) throw_errno("fstat", path);
  if (!S_ISREG(st.st_mode)) refuse(path + " exists and is not a regular file; remove it");
  if (st.st_uid != ::geteuid())
    refuse(path + " is owned by " + owner_text(st.st_uid, true) + ", not by you: hvrun writes only files of its own; "
           "remove it");
  if (st.st_nlink != 1)
    refuse(path + " has " + std::to_string(st.st_nlink) + " names (hard links): hvrun writes only files of its own; "
           "remove it");
  if (st.st_size != 0 && ::ftruncate(fd.get(), 0) != 0) throw_errno("ftruncate", path);
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags == -1 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) throw_errno("fcntl(F_SETFL)", path);
  return fd;
}

}  // namespace hvrun

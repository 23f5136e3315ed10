#include "agent/sync_check.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <map>
#include <string_view>

#include "common/checked_directory.hpp"
#include "common/error.hpp"
#include "common/file_digest.hpp"

namespace hvrun {

namespace {

void check_path(const std::string& path) {
  if (path.empty() || path.front() != '/') throw ProtocolError("launcher: sync path '" + path + "' is not absolute");
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    if (std::string_view(path).substr(start, end - start) == "..")
      throw ProtocolError("launcher: sync path '" + path + "' has a '..' component");
    start = end + 1;
  }
}

std::uint64_t size_of(const SyncFile& f) {
  std::uint64_t size = 0;
  const auto [end, ec] = std::from_chars(f.size.data(), f.size.data() + f.size.size(), size);
  if (ec != std::errc() || end != f.size.data() + f.size.size() || f.size.empty())
    throw ProtocolError("launcher: sync size '" + f.size + "' of " + f.path + " is not a number");
  return size;
}

// Whether `dir` is one the launcher's copy may write in (common/checked_directory.hpp's rule).
bool trusted_directory(const std::string& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return false;
  if (S_ISLNK(st.st_mode) &&
      (!link_refusal(dir, st.st_uid, ::geteuid(), false).empty() || ::stat(dir.c_str(), &st) != 0))
    return false;
  return S_ISDIR(st.st_mode) && directory_refusal(dir, st.st_uid, st.st_gid, st.st_mode, ::geteuid(), false).empty();
}

// Whether every directory above `path` is trusted; `known` keeps the answers of one check.
bool trusted_parents(const std::string& path, std::map<std::string, bool>& known) {
  for (std::size_t end = path.find('/', 1); end != std::string::npos; end = path.find('/', end + 1)) {
    const std::string dir = path.substr(0, end);
    auto [it, fresh] = known.try_emplace(dir, false);
    if (fresh) it->second = trusted_directory(dir);
    if (!it->second) return false;
  }
  return true;
}

// A file counts as the same only where no one else can change it: a regular file of this user (never a
// link) in trusted directories. Anything else is sent, and the copy replaces it or refuses, naming what
// is in the way.
bool differs(const SyncFile& f, std::uint64_t size, std::map<std::string, bool>& known) {
  struct stat st{};
  if (::lstat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != size ||
      st.st_uid != ::geteuid() || !trusted_parents(f.path, known))
    return true;
  try {
    return sha256_file(f.path) != f.sha256;
  } catch (const Error&) {
    return true;  // unreadable here: the copy replaces it, or its failure names the file
  }
}

// Each file's size, every path checked first (ProtocolError).
std::vector<std::uint64_t> checked_sizes(const std::vector<SyncFile>& files) {
  std::vector<std::uint64_t> sizes;
  for (const SyncFile& f : files) {
    check_path(f.path);
    sizes.push_back(size_of(f));
  }
  return sizes;
}

std::vector<int> differing(const std::vector<SyncFile>& files, const std::vector<std::uint64_t>& sizes,
                           std::stop_token stop) {
  std::vector<int> need;
  std::map<std::string, bool> known;
  for (std::size_t i = 0; i < files.size() && !stop.stop_requested(); ++i)
    if (differs(files[i], sizes[i], known)) need.push_back(static_cast<int>(i));
  return need;
}

}  // namespace

std::vector<int> files_to_sync(const std::vector<SyncFile>& files, std::stop_token stop) {
  return differing(files, checked_sizes(files), stop);
}

void SyncChecker::start(std::vector<SyncFile> files, Done done) {
  if (thread_.joinable()) throw ProtocolError("launcher: a second sync check");
  std::vector<std::uint64_t> sizes = checked_sizes(files);  // a bad path is refused here, on the loop
  thread_ = std::jthread(
      [files = std::move(files), sizes = std::move(sizes), done = std::move(done)](std::stop_token stop) {
        std::vector<int> need = differing(files, sizes, stop);
        if (!stop.stop_requested()) done(std::move(need));
      });
}

}  // namespace hvrun

#include "agent/sync_check.hpp"

#include <sys/stat.h>

#include <charconv>
#include <string_view>

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

bool differs(const SyncFile& f, std::uint64_t size) {
  struct stat st{};
  if (::stat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != size)
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
  for (std::size_t i = 0; i < files.size() && !stop.stop_requested(); ++i)
    if (differs(files[i], sizes[i])) need.push_back(static_cast<int>(i));
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

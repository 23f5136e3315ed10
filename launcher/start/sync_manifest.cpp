#include "launcher/start/sync_manifest.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "common/error.hpp"
#include "common/file_digest.hpp"
#include "launcher/base/host_names.hpp"

namespace hvrun {

namespace fs = std::filesystem;

namespace {

struct Entry {
  std::uint64_t size = 0;
  std::uint32_t mode = 0;
};

// Every regular file under `root`, by absolute path; symbolic links and special files into `skipped`.
void list_dir(const fs::path& root, std::map<std::string, Entry>& files, std::vector<std::string>& skipped) {
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) throw UsageError("--sync " + root.string() + ": cannot list it (" + ec.message() + ")");
  for (; it != end; it.increment(ec)) {
    if (ec) throw UsageError("--sync " + root.string() + ": cannot list it (" + ec.message() + ")");
    const fs::path& p = it->path();
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0) throw_errno("lstat", p.string() + " (--sync " + root.string() + ")");
    if (S_ISREG(st.st_mode))
      files[p.string()] = {static_cast<std::uint64_t>(st.st_size), static_cast<std::uint32_t>(st.st_mode & 07777)};
    else if (!S_ISDIR(st.st_mode))
      skipped.push_back(p.string());
  }
}

}  // namespace

SyncManifest sync_manifest(const std::vector<std::string>& dirs, std::uint64_t limit) {
  std::map<std::string, Entry> files;
  SyncManifest m;
  for (const std::string& dir : dirs) {
    const fs::path root = fs::absolute(dir).lexically_normal();
    struct stat st{};
    if (::stat(root.c_str(), &st) != 0)
      throw UsageError("--sync " + dir + ": " + std::strerror(errno) + "; give a directory that exists here");
    if (!S_ISDIR(st.st_mode)) throw UsageError("--sync " + dir + ": not a directory; give the directory that holds it");
    list_dir(root, files, m.skipped);
  }
  if (files.size() > kSyncMaxFiles)
    throw UsageError("--sync: the directories hold " + std::to_string(files.size()) + " files, more than the " +
                     std::to_string(kSyncMaxFiles) + " one check can list; sync a smaller directory (an archive "
                     "of the rest, unpacked by the job, travels as one file)");
  for (const auto& [path, e] : files) m.total_bytes += e.size;
  if (m.total_bytes > limit)
    throw UsageError("--sync: the directories hold " + byte_count_text(m.total_bytes) + " in " +
                     std::to_string(files.size()) + (files.size() == 1 ? " file" : " files") + ", more than --sync-limit " + byte_count_text(limit) +
                     "; sync a smaller directory or raise --sync-limit");
  for (const auto& [path, e] : files) {
    m.files.push_back({path, std::to_string(e.size), sha256_file(path)});
    m.modes.push_back(e.mode);
    m.sizes.push_back(e.size);
  }
  std::sort(m.skipped.begin(), m.skipped.end());
  return m;
}

std::vector<FileCopy> sync_copies(const SyncManifest& manifest, const std::vector<int>& need, const std::string& peer) {
  std::vector<FileCopy> copies;
  int previous = -1;
  for (int i : need) {
    if (i <= previous || static_cast<std::size_t>(i) >= manifest.files.size())
      throw ProtocolError(peer + ": sync need names file " + std::to_string(i) + " of " +
                          std::to_string(manifest.files.size()) + " out of order");
    previous = i;
    const auto k = static_cast<std::size_t>(i);
    copies.push_back({manifest.files[k].path, manifest.files[k].path, manifest.modes[k]});
  }
  return copies;
}

FingerprintMsg after_sync(FingerprintMsg f, const SyncManifest& manifest) {
  if (f.script.empty()) return f;
  const auto it = std::lower_bound(manifest.files.begin(), manifest.files.end(), f.script,
                                   [](const SyncFile& file, const std::string& path) { return file.path < path; });
  if (it != manifest.files.end() && it->path == f.script) {
    f.script_error.clear();
    f.script_sha256 = it->sha256;
  }
  return f;
}

std::chrono::milliseconds sync_timeout(std::uint64_t bytes, std::chrono::milliseconds base) {
  return base + std::chrono::milliseconds(bytes * 1000 / (1u << 20));
}

std::string byte_count_text(std::uint64_t bytes) {
  std::string text = std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  if (bytes < (1u << 20)) return text;
  static constexpr const char* kUnits[] = {"MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / (1u << 20);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  char unit[32];
  std::snprintf(unit, sizeof unit, " (%.1f %s)", v, kUnits[u]);
  return text + unit;
}

std::string sync_summary(const SyncManifest& manifest, const std::vector<HostSync>& hosts, bool check_only) {
  std::map<std::pair<std::size_t, std::uint64_t>, std::vector<std::string>> sent;  // (files, bytes) -> hosts
  std::vector<std::string> current;
  for (const HostSync& h : hosts) {
    if (h.files == 0)
      current.push_back(h.host);
    else
      sent[{h.files, h.bytes}].push_back(h.host);
  }
  const std::size_t n = manifest.files.size();
  std::string text = "--sync: ";
  for (const auto& [what, names] : sent) {
    if (text.size() > 8) text += "; ";
    text += std::string(check_only ? "would send " : "sent ") + std::to_string(what.first) +
            (what.first == 1 ? " file, " : " files, ") + byte_count_text(what.second) + ", to " + fold_names(names);
  }
  if (!current.empty())
    text += std::string(text.size() > 8 ? "; " : "") + fold_names(current) + (current.size() == 1 ? " has" : " have") +
            (n == 1 ? " the file" : " all " + std::to_string(n) + " files") + " already";
  if (!manifest.skipped.empty())
    text += "; not sent: " + std::to_string(manifest.skipped.size()) +
            (manifest.skipped.size() == 1 ? " symbolic link or special file (" : " symbolic links or special files (") +
            manifest.skipped.front() + (manifest.skipped.size() > 1 ? ", ..." : "") + ")";
  return text;
}

}  // namespace hvrun

#include "launcher/nic/nic_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <system_error>

#include "common/checked_directory.hpp"
#include "common/control_message.hpp"
#include "common/error.hpp"
#include "common/job_secret.hpp"
#include "common/unique_fd.hpp"
#include "common/write_fully.hpp"

namespace hvrun {

namespace {

using json = nlohmann::json;

// Bumped when what an entry means changes: older entries are then never read.
constexpr int kFormat = 1;
// An entry is a few hundred bytes per host; anything far larger is not one of ours.
constexpr std::size_t kMaxEntryBytes = std::size_t{16} << 20;

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw Error("EVP_Digest(SHA-256) failed while keying the probe cache");
  return hex_encode(std::string_view(reinterpret_cast<const char*>(md), len));
}

json choice_json(const NicChoice& c) { return json{{"iface", c.iface}, {"address", c.address}, {"why", c.why}}; }

NicChoice choice_of(const json& j) {
  return NicChoice{j.at("iface").get<std::string>(), j.at("address").get<std::string>(),
                   j.value("why", std::string())};
}

long long seconds_of(NicCache::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

NicCache::NicCache(std::string dir) : dir_(std::move(dir)) {}

std::optional<std::string> NicCache::default_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return std::string(xdg) + "/hvrun/nics";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return std::string(home) + "/.cache/hvrun/nics";
  return std::nullopt;
}

std::string NicCache::key(const std::vector<HostInventory>& inventories, const std::vector<std::string>& stacks,
                          const std::vector<std::string>& filter, std::size_t peers, bool single_host) {
  json hosts = json::array();
  for (std::size_t i = 0; i < inventories.size(); ++i) {
    const HostInventory& inv = inventories[i];
    hosts.push_back(json{{"host", inv.host}, {"hostname", inv.hostname},
                         {"stack", i < stacks.size() ? stacks[i] : std::string()},
                         {"nics", encode_interfaces(inv.interfaces)}});
  }
  const json inputs{{"format", kFormat}, {"filter", filter}, {"peers", peers}, {"single_host", single_host},
                    {"hosts", std::move(hosts)}};
  return sha256_hex(inputs.dump());
}

std::string NicCache::path_of(const std::string& key) const { return dir_ + "/" + key + ".json"; }

std::optional<CheckedDirectory> NicCache::directory(bool create) const {
  refusal_.clear();
  struct stat st{};
  if (!create && ::lstat(dir_.c_str(), &st) != 0) return std::nullopt;  // nothing stored yet
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(dir_).parent_path(), ec);
  if (ec) {
    spdlog::warn("probe cache: cannot create {}: {}; the next launch probes again", dir_, ec.message());
    return std::nullopt;
  }
  try {
    CheckedDirectory dir = CheckedDirectory::open(dir_, 0700, "probe cache");
    if (::fchmod(dir.fd(), 0700) != 0) throw_errno("fchmod", dir_);
    return std::optional<CheckedDirectory>(std::move(dir));
  } catch (const Error& e) {
    refusal_ = e.what();
    spdlog::warn("{}; the probe cache is not used, and each launch probes again", refusal_);
    return std::nullopt;
  }
}

std::optional<NicCache::Entry> NicCache::load(const std::string& key, std::size_t members, Clock::time_point now) const {
  const auto dir = directory(false);
  if (!dir) return std::nullopt;
  // An entry is read only when it is this user's and no one else could have written it.
  UniqueFd fd(::openat(dir->fd(), (key + ".json").c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return std::nullopt;
  std::string text(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), kMaxEntryBytes), '\0');
  const ssize_t n = retry_eintr([&] { return ::read(fd.get(), text.data(), text.size()); });
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<std::size_t>(n));
  try {
    const json j = json::parse(text);
    if (j.at("format").get<int>() != kFormat || j.at("key").get<std::string>() != key) return std::nullopt;
    Entry e;
    e.made = Clock::time_point(std::chrono::seconds(j.at("made").get<long long>()));
    if (e.made > now || now - e.made > kMaxAge) return std::nullopt;
    for (const json& s : j.at("hosts")) {
      CachedSelection c{choice_of(s.at("selected")), {}};
      for (const json& u : s.at("usable")) c.usable.push_back(choice_of(u));
      e.selections.push_back(std::move(c));
    }
    if (e.selections.size() != members) return std::nullopt;
    return e;
  } catch (const json::exception&) {
    return std::nullopt;  // not an entry this hvrun wrote: a miss, overwritten by the next store
  }
}

void NicCache::store(const std::string& key, const std::vector<CachedSelection>& selections,
                     Clock::time_point now) const {
  json hosts = json::array();
  for (const CachedSelection& s : selections) {
    json usable = json::array();
    for (const NicChoice& u : s.usable) usable.push_back(choice_json(u));
    hosts.push_back(json{{"selected", choice_json(s.selected)}, {"usable", std::move(usable)}});
  }
  const std::string text =
      json{{"format", kFormat}, {"key", key}, {"made", seconds_of(now)}, {"hosts", std::move(hosts)}}.dump() + "\n";
  const auto dir = directory(true);
  if (!dir) return;
  const std::string name = key + ".json", tmp = name + ".tmp-" + std::to_string(::getpid());
  (void)::unlinkat(dir->fd(), tmp.c_str(), 0);  // a killed launcher's, of the same pid
  UniqueFd fd(::openat(dir->fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    spdlog::warn("probe cache: open({}/{}): {}; the next launch probes again", dir_, tmp, std::strerror(errno));
    return;
  }
  const bool written = write_fully(fd.get(), text);
  const int saved = errno;
  fd.reset();
  if (!written || ::renameat(dir->fd(), tmp.c_str(), dir->fd(), name.c_str()) != 0) {
    spdlog::warn("probe cache: {} {}/{}: {}; the next launch probes again", written ? "rename" : "write", dir_, tmp,
                 std::strerror(written ? errno : saved));
    (void)::unlinkat(dir->fd(), tmp.c_str(), 0);
  }
}

void NicCache::forget(const std::string& key) const {
  const auto dir = directory(false);
  if (dir && ::unlinkat(dir->fd(), (key + ".json").c_str(), 0) != 0 && errno != ENOENT)
    spdlog::warn("probe cache: unlink({}): {}; remove it, or launch with --disable-cache", path_of(key),
                 std::strerror(errno));
}

}  // namespace hvrun

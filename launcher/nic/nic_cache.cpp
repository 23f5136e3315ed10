#include "launcher/nic/nic_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <system_error>

#include "common/control_message.hpp"
#include "common/error.hpp"
#include "common/file_digest.hpp"
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

std::optional<NicCache::Entry> NicCache::load(const std::string& key, std::size_t members, Clock::time_point now) const {
  const std::string text = read_file_head(path_of(key), kMaxEntryBytes);
  if (text.empty()) return std::nullopt;
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
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (!ec && ::chmod(dir_.c_str(), 0700) != 0) ec = std::error_code(errno, std::generic_category());
  if (ec) {
    spdlog::warn("probe cache: cannot create {}: {}; the next launch probes again", dir_, ec.message());
    return;
  }
  const std::string tmp = path_of(key) + ".tmp-" + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    spdlog::warn("probe cache: open({}): {}; the next launch probes again", tmp, std::strerror(errno));
    return;
  }
  const bool written = write_fully(fd.get(), text);
  const int saved = errno;
  fd.reset();
  if (!written || ::rename(tmp.c_str(), path_of(key).c_str()) != 0) {
    spdlog::warn("probe cache: {} {}: {}; the next launch probes again", written ? "rename" : "write", tmp,
                 std::strerror(written ? errno : saved));
    ::unlink(tmp.c_str());
  }
}

void NicCache::forget(const std::string& key) const {
  if (::unlink(path_of(key).c_str()) != 0 && errno != ENOENT)
    spdlog::warn("probe cache: unlink({}): {}; remove it, or launch with --disable-cache", path_of(key),
                 std::strerror(errno));
}

}  // namespace hvrun

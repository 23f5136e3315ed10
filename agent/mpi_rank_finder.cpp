#include "agent/mpi_rank_finder.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <memory>
#include <vector>

#include "agent/proc_scan.hpp"
#include "common/file_digest.hpp"
#include "common/rank_contract_names.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kMaxEnvironBytes = 1 << 20;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// The link /proc/PID/ns/net (or .../self/...) names; "" when it cannot be read.
std::string net_ns_of(const std::string& pid) {
  char target[64];
  const ssize_t n = ::readlink(("/proc/" + pid + "/ns/net").c_str(), target, sizeof target);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

std::string environ_of(pid_t pid) { return read_file_head("/proc/" + std::to_string(pid) + "/environ", kMaxEnvironBytes); }

// The value of `name` in `environ`; nullopt when it is not there.
std::optional<std::string_view> value_of(std::string_view environ, std::string_view name) {
  for (std::size_t at = 0; at < environ.size();) {
    const std::size_t end = std::min(environ.find('\0', at), environ.size());
    const std::string_view entry = environ.substr(at, end - at);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return entry.substr(name.size() + 1);
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> mpi_rank_in(std::string_view environ, std::string_view marker) {
  if (marker.empty() || value_of(environ, rank_contract::kMpiMarker) != marker) return std::nullopt;
  for (const std::string_view name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    const auto value = value_of(environ, name);
    int rank = -1;
    if (value && std::from_chars(value->data(), value->data() + value->size(), rank).ptr == value->data() + value->size() &&
        rank >= 0)
      return rank;
  }
  return std::nullopt;
}

MpiRankFinder::MpiRankFinder(boost::asio::io_context& io, std::string marker, std::function<void(int, pid_t)> found)
    : timer_(io), marker_(std::move(marker)), found_(std::move(found)), net_ns_(net_ns_of("self")) {}

void MpiRankFinder::start() {
  stopped_ = false;
  scan();
}

void MpiRankFinder::stop() {
  stopped_ = true;
  timer_.cancel();
}

void MpiRankFinder::arm() {
  timer_.expires_after(kScan);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopped_) scan();
  });
}

void MpiRankFinder::scan() {
  std::unique_ptr<DIR, DirCloser> proc(::opendir("/proc"));
  std::map<pid_t, std::string> now;
  const uid_t me = ::getuid();
  for (const dirent* e = proc ? ::readdir(proc.get()) : nullptr; e != nullptr; e = ::readdir(proc.get())) {
    pid_t pid = 0;
    const std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), pid).ptr != name.data() + name.size()) continue;
    struct stat st{};
    if (::stat(("/proc/" + std::string(name)).c_str(), &st) != 0 || st.st_uid != me) continue;
    const auto stat = read_proc_stat(pid);
    if (!stat) continue;
    now.emplace(pid, stat->comm);
    if (const auto before = read_.find(pid); before != read_.end() && before->second == stat->comm) continue;
    const auto rank = mpi_rank_in(environ_of(pid), marker_);
    if (!rank || mpi_rank_in(environ_of(stat->ppid), marker_)) continue;  // not a rank, or a rank's own child
    if (const std::string ns = net_ns_of(std::string(name)); !ns.empty() && !net_ns_.empty() && ns != net_ns_) continue;
    found_(*rank, pid);
  }
  read_ = std::move(now);
  arm();
}

}  // namespace hvrun

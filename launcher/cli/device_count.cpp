#include "launcher/cli/device_count.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <string_view>

#include "common/error.hpp"

namespace hvrun {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> items_of(std::string_view list) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0;;) {
    const std::size_t comma = list.find(',', at);
    out.push_back(trimmed(list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at)));
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

// An ordinal as CUDA reads an item (strtoul's way): an optional sign, then the leading digits; -1 when
// the item has none or is negative, which ends the list.
long ordinal(std::string_view item) {
  bool negative = false;
  if (!item.empty() && (item.front() == '+' || item.front() == '-')) {
    negative = item.front() == '-';
    item.remove_prefix(1);
  }
  long value = 0;
  std::size_t digits = 0;
  for (; digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits])); ++digits)
    value = std::min<long>(value * 10 + (item[digits] - '0'), std::numeric_limits<int>::max());
  if (digits == 0 || (negative && value != 0)) return -1;
  return value;
}

int visible_by_uuid(const std::vector<std::string>& driver_gpus, std::string_view visible) {
  const std::string_view prefix = visible.substr(0, 4);  // "GPU-" or "MIG-"
  std::set<std::string_view> seen;
  int count = 0;
  for (const std::string_view item : items_of(visible)) {
    if (!item.starts_with(prefix)) break;
    if (!seen.insert(item).second) return 0;
    const bool found = prefix == "MIG-" || std::any_of(driver_gpus.begin(), driver_gpus.end(), [&](const std::string& g) {
                         return !g.empty() && std::string_view(g).starts_with(item);
                       });
    if (!found) break;
    ++count;
  }
  return count;
}

}  // namespace

std::string per_host_count_name(PerHostCount count) {
  switch (count) {
    case PerHostCount::kGpu: return "gpu";
    case PerHostCount::kCpu: return "cpu";
    case PerHostCount::kAuto: return "auto";
    case PerHostCount::kNone: break;
  }
  return "N";
}

int visible_gpus(const std::vector<std::string>& driver_gpus, const std::optional<std::string>& visible) {
  const int listed = static_cast<int>(driver_gpus.size());
  if (!visible) return listed;
  const std::string_view list = trimmed(*visible);
  if (list.starts_with("GPU-") || list.starts_with("MIG-")) return visible_by_uuid(driver_gpus, list);
  std::set<long> seen;
  int count = 0;
  for (const std::string_view item : items_of(list)) {
    const long n = ordinal(item);
    if (n < 0) break;
    if (!seen.insert(n).second) return 0;
    if (n >= listed) break;
    ++count;
  }
  return count;
}

int ranks_for(PerHostCount count, const std::string& host, const HostDevices& devices,
              const std::optional<std::string>& visible) {
  const int gpus = devices.gpus ? visible_gpus(*devices.gpus, visible) : 0;
  if (count == PerHostCount::kCpu || (count == PerHostCount::kAuto && gpus == 0)) return std::max(devices.cpus, 1);
  if (gpus > 0) return gpus;
  const std::string why =
      !devices.gpus        ? "no NVIDIA driver there (no /proc/driver/nvidia/gpus)"
      : devices.gpus->empty() ? "the NVIDIA driver there lists no GPU"
                              : "CUDA_VISIBLE_DEVICES='" + *visible + "' (hvrun's environment or -x, as the ranks get it) "
                                "hides all " + std::to_string(devices.gpus->size()) + " of its GPUs";
  throw UsageError("--nproc-per-node gpu: " + host + " has no GPU that CUDA would show the ranks: " + why +
                   "; torchrun would say 'Cuda is not available'. Give --nproc-per-node cpu or auto, or a number");
}

void apply_counts(LaunchOptions& o, const std::vector<int>& counts) {
  const std::string flag = "--nproc-per-node " + per_host_count_name(o.per_host_count);
  long np = 0;
  int fewest = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < o.hosts.size(); ++i) {
    o.hosts[i].slots = counts.at(i);
    np += counts[i];
    fewest = std::min(fewest, counts[i]);
  }
  if (np > std::numeric_limits<int>::max())
    throw UsageError(flag + ": the hosts' counts add up to " + std::to_string(np) + " ranks, too many; give a number");
  o.np = static_cast<int>(np);
  if (o.counted_min_hosts > 0) o.min_np = o.counted_min_hosts * fewest;
  if (o.min_np > o.np)
    throw UsageError("--min-np " + std::to_string(o.min_np) + " exceeds the job's " + std::to_string(o.np) +
                     " ranks (the hosts' counts under " + flag + "); give --min-np at most " + std::to_string(o.np));
  o.per_host_count = PerHostCount::kNone;
}

}  // namespace hvrun

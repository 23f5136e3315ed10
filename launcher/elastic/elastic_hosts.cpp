#include "launcher/elastic/elastic_hosts.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "common/error.hpp"

namespace hvrun {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<HostSlots> parse_discovery_output(std::string_view out, std::optional<int> slots_per_host,
                                              const std::string& script) {
  std::vector<HostSlots> hosts;
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string_view::npos) end = out.size();
    const std::string_view line = trim(out.substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    const auto bad = [&](const std::string& why) {
      return UsageError("--host-discovery-script " + script + " printed '" + std::string(line) + "': " + why +
                        "; print one HOST or HOST:SLOTS per line");
    };
    HostSlots h;
    const std::size_t colon = line.find(':');
    h.host = std::string(line.substr(0, colon));
    if (h.host.empty() || h.host.find_first_of(" \t") != std::string::npos) throw bad("not a host name");
    if (colon == std::string_view::npos) {
      if (!slots_per_host)
        throw bad("a host without slots, and --slots-per-host is not given; give --slots-per-host N or print " +
                  h.host + ":N");
      h.slots = *slots_per_host;
    } else {
      const std::string_view n = line.substr(colon + 1);
      const auto [end_of_number, ec] = std::from_chars(n.data(), n.data() + n.size(), h.slots);
      if (ec != std::errc{} || end_of_number != n.data() + n.size() || h.slots < 1)
        throw bad("slots that are not a positive number");
    }
    const auto same = std::find_if(hosts.begin(), hosts.end(), [&](const HostSlots& o) { return o.host == h.host; });
    if (same == hosts.end())
      hosts.push_back(std::move(h));
    else if (same->slots != h.slots)
      throw bad("the host again with " + std::to_string(h.slots) + " slots after " + std::to_string(same->slots));
  }
  return hosts;
}

std::string SlotInfo::response() const {
  return std::to_string(rank) + "," + std::to_string(size) + "," + std::to_string(local_rank) + "," +
         std::to_string(local_size) + "," + std::to_string(cross_rank) + "," + std::to_string(cross_size);
}

std::vector<SlotInfo> assign_slots(const std::vector<HostSlots>& hosts, std::optional<int> max_np) {
  std::vector<SlotInfo> slots;
  std::vector<int> at_local;  // hosts with a slot at each local rank so far
  for (const HostSlots& h : hosts) {
    const std::size_t first = slots.size();
    for (int local = 0; local < h.slots && !(max_np && static_cast<int>(slots.size()) == *max_np); ++local) {
      if (static_cast<std::size_t>(local) == at_local.size()) at_local.push_back(0);
      SlotInfo s;
      s.host = h.host;
      s.rank = static_cast<int>(slots.size());
      s.local_rank = local;
      s.cross_rank = at_local[static_cast<std::size_t>(local)]++;
      slots.push_back(std::move(s));
    }
    for (std::size_t k = first; k < slots.size(); ++k) slots[k].local_size = static_cast<int>(slots.size() - first);
  }
  for (SlotInfo& s : slots) {
    s.size = static_cast<int>(slots.size());
    s.cross_size = at_local[static_cast<std::size_t>(s.local_rank)];
  }
  return slots;
}

ElasticHosts::ElasticHosts(std::optional<std::pair<int, int>> cooldown, std::function<double()> jitter)
    : cooldown_(cooldown), jitter_(std::move(jitter)) {}

bool ElasticHosts::resurrected(const std::string& host, Clock::time_point now) const {
  const auto it = states_.find(host);
  return it != states_.end() && it->second.cooldown_end && now >= *it->second.cooldown_end;
}

HorovodHostUpdate ElasticHosts::update(const std::vector<HostSlots>& discovered, Clock::time_point now) {
  std::map<std::string, int> slots;
  for (const HostSlots& h : discovered) slots[h.host] = h.slots;
  const bool any_resurrected =
      std::any_of(discovered.begin(), discovered.end(), [&](const HostSlots& h) { return resurrected(h.host, now); });
  if (slots == slots_ && !any_resurrected) return HorovodHostUpdate::kNoUpdate;

  const auto usable = [&](const std::string& host) { return !blacklisted(host) || resurrected(host, now); };
  std::vector<std::string> order;
  for (const std::string& h : order_)
    if (slots.count(h) != 0 && usable(h)) order.push_back(h);
  for (const HostSlots& h : discovered)
    if (usable(h.host) && std::find(order.begin(), order.end(), h.host) == order.end()) order.push_back(h.host);

  int res = 0;
  for (const auto& [host, n] : slots_)
    if (slots.count(host) == 0) res |= static_cast<int>(HorovodHostUpdate::kRemoved);
  for (const auto& [host, n] : slots) {
    const auto prev = slots_.find(host);
    if (prev == slots_.end() || n > prev->second)
      res |= static_cast<int>(HorovodHostUpdate::kAdded);
    else if (n < prev->second)
      res |= static_cast<int>(HorovodHostUpdate::kRemoved);
    else if (resurrected(host, now))
      res |= static_cast<int>(HorovodHostUpdate::kAdded);
  }
  for (const HostSlots& h : discovered)
    if (resurrected(h.host, now)) states_[h.host] = State{false, states_[h.host].count, std::nullopt};
  slots_ = std::move(slots);
  order_ = std::move(order);
  return static_cast<HorovodHostUpdate>(res);
}

void ElasticHosts::blacklist(const std::string& host, Clock::time_point now) {
  State& s = states_[host];
  s.blacklisted = true;
  // Out of the order for good: a host whose cooldown ends joins again at its end, as a new one.
  order_.erase(std::remove(order_.begin(), order_.end(), host), order_.end());
  if (s.cooldown_end && *s.cooldown_end > now) return;  // already cooling down: the period stands
  if (!cooldown_) return;
  ++s.count;
  // Exponential in the times blacklisted, with a random part, within the range.
  const double lower = cooldown_->first, upper = cooldown_->second;
  const double delay = lower * static_cast<double>(1LL << std::min(s.count, 40)) + jitter_() * lower;
  const double seconds = std::max(lower, std::min(upper, delay));
  s.cooldown_end = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool ElasticHosts::blacklisted(const std::string& host) const {
  const auto it = states_.find(host);
  return it != states_.end() && it->second.blacklisted;
}

std::optional<ElasticHosts::Clock::time_point> ElasticHosts::cooldown_end(const std::string& host) const {
  const auto it = states_.find(host);
  if (it == states_.end() || !it->second.blacklisted) return std::nullopt;
  return it->second.cooldown_end;
}

std::vector<HostSlots> ElasticHosts::available() const {
  std::vector<HostSlots> out;
  for (const std::string& h : order_)
    if (!blacklisted(h)) out.push_back({h, slots_.at(h)});
  return out;
}

int ElasticHosts::available_slots() const {
  int n = 0;
  for (const HostSlots& h : available()) n += h.slots;
  return n;
}

}  // namespace hvrun

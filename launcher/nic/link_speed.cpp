#include "launcher/nic/link_speed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hvrun {

std::vector<std::pair<std::size_t, std::size_t>> link_ring(std::size_t hosts) {
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  if (hosts < 2) return pairs;
  if (hosts == 2) return {{0, 1}, {1, 0}};
  for (std::size_t i = 0; i < hosts; ++i) pairs.emplace_back(i, (i + 1) % hosts);
  return pairs;
}

LinkJudgement judge_links(const std::vector<LinkFigure>& figures, std::size_t hosts) {
  LinkJudgement j;
  std::vector<double> best(hosts, -1.0);
  for (std::size_t k = 0; k < figures.size(); ++k) {
    const LinkFigure& f = figures[k];
    if (!f.measured()) {
      j.failed.push_back(k);
      continue;
    }
    for (const std::size_t h : {f.from, f.to})
      if (h < hosts) best[h] = std::max(best[h], f.mb_per_s());
  }
  std::vector<double> bests;
  for (const double b : best)
    if (b >= 0) bests.push_back(b);
  if (bests.empty()) return j;
  std::sort(bests.begin(), bests.end());
  const std::size_t mid = bests.size() / 2;
  j.reference = bests.size() % 2 ? bests[mid] : (bests[mid - 1] + bests[mid]) / 2;
  for (std::size_t k = 0; k < figures.size(); ++k)
    if (figures[k].measured() && figures[k].mb_per_s() < j.reference * kDegradedFraction) j.degraded.push_back(k);
  for (std::size_t h = 0; h < hosts; ++h) {
    bool any = false;
    bool all_degraded = true;
    for (std::size_t k = 0; k < figures.size(); ++k) {
      const LinkFigure& f = figures[k];
      if (!f.measured() || (f.from != h && f.to != h)) continue;
      any = true;
      all_degraded = all_degraded && std::find(j.degraded.begin(), j.degraded.end(), k) != j.degraded.end();
    }
    if (any && all_degraded) j.named.push_back(h);
  }
  return j;
}

namespace {

// One decimal below 100, none from there; rounded down (but for the binary fraction's dust), so "900+"
// never claims more than was measured.
std::string number_text(double v) {
  constexpr double kDust = 1e-9;
  char out[32];
  if (v < 100)
    std::snprintf(out, sizeof out, "%.1f", std::floor(v * 10 + kDust) / 10);
  else
    std::snprintf(out, sizeof out, "%.0f", std::floor(v + kDust));
  return out;
}

std::string nic_of(const LinkHost& h) { return h.name + " " + h.iface + " (" + h.address + ")"; }

// "the others 900+ MB/s": the slowest figure that is not degraded.
std::string others_text(const std::vector<LinkFigure>& figures, const LinkJudgement& j) {
  double slowest = -1;
  for (std::size_t k = 0; k < figures.size(); ++k)
    if (figures[k].measured() && std::find(j.degraded.begin(), j.degraded.end(), k) == j.degraded.end())
      slowest = slowest < 0 ? figures[k].mb_per_s() : std::min(slowest, figures[k].mb_per_s());
  if (slowest < 0) return "";
  return ", the others " + number_text(slowest) + "+ MB/s";
}

}  // namespace

std::string rate_text(double mb_per_s) { return number_text(mb_per_s) + " MB/s"; }

std::vector<std::string> link_warnings(const std::vector<LinkFigure>& figures, const std::vector<LinkHost>& hosts) {
  std::vector<std::string> lines;
  const LinkJudgement j = judge_links(figures, hosts.size());
  const std::string others = others_text(figures, j);
  auto name = [&](std::size_t h) { return h < hosts.size() ? hosts[h].name : "host " + std::to_string(h); };
  auto is_named = [&](std::size_t h) { return std::find(j.named.begin(), j.named.end(), h) != j.named.end(); };
  for (const std::size_t h : j.named) {
    std::vector<std::string> parts;
    for (const LinkFigure& f : figures)
      if (f.measured() && (f.from == h || f.to == h))
        parts.push_back(rate_text(f.mb_per_s()) + (f.from == h ? " to " + name(f.to) : " from " + name(f.from)));
    std::string figures_text;
    for (std::size_t p = 0; p < parts.size(); ++p) figures_text += (p == 0 ? "" : p + 1 == parts.size() ? " and " : ", ") + parts[p];
    lines.push_back(nic_of(hosts[h]) + ": " + figures_text + others + ": a degraded link? (tc, ethtool " +
                    hosts[h].iface + ": speed/duplex)");
  }
  for (const std::size_t k : j.degraded) {
    const LinkFigure& f = figures[k];
    if (is_named(f.from) || is_named(f.to) || f.from >= hosts.size()) continue;
    lines.push_back(nic_of(hosts[f.from]) + " to " + name(f.to) + ": " + rate_text(f.mb_per_s()) + others +
                    ": a degraded link between them? (tc, ethtool " + hosts[f.from].iface + ": speed/duplex)");
  }
  for (const std::size_t k : j.failed) {
    const LinkFigure& f = figures[k];
    if (f.from >= hosts.size() || f.to >= hosts.size()) continue;
    lines.push_back("no link figure from " + nic_of(hosts[f.from]) + " to " + nic_of(hosts[f.to]) + ": " +
                    (f.error.empty() ? "no answer" : f.error));
  }
  return lines;
}

}  // namespace hvrun

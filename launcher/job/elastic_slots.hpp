#pragma once
// The vocabulary the elastic driver's parts share (elastic_job.cpp, elastic_rounds, elastic_workers,
// late_workers, held_workers): a slot as the discovery names it, and small views of an assignment.
#include <string>
#include <utility>
#include <vector>

#include "launcher/elastic/elastic_hosts.hpp"

namespace hvrun {

using SlotKey = std::pair<std::string, int>;  // (host as discovered, local rank)

// rank_and_size's answer to a worker whose slot is not in the world (SlotInfo::response of no slot).
inline constexpr const char* kUnassigned = "-1,-1,-1,-1,-1,-1";

// "host[local rank]", as the job's lines name a slot.
inline std::string slot_text(const SlotKey& k) { return k.first + "[" + std::to_string(k.second) + "]"; }

// The hosts of an assignment, in its order, each once.
inline std::vector<std::string> assignment_hosts(const std::vector<SlotInfo>& a) {
  std::vector<std::string> names;
  for (const SlotInfo& s : a)
    if (names.empty() || names.back() != s.host) names.push_back(s.host);
  return names;
}

inline int slot_count(const std::vector<HostSlots>& hs) {
  int n = 0;
  for (const auto& h : hs) n += h.slots;
  return n;
}

}  // namespace hvrun

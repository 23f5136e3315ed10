#pragma once
// The words of the status line while hosts connect and agents come up: counts at first, and from
// kNamePendingAfter on also the hosts still pending, so an unreachable host shows by name long before
// its timeout ("connected 1/2, agents up 1/2; waiting for lab7").
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun {

inline constexpr std::chrono::milliseconds kNamePendingAfter{2000};
// At most this many pending hosts are named; the rest are counted ("(+3 more)").
inline constexpr std::size_t kPendingNamed = 3;

struct StartProgress {
  std::size_t hosts = 0;
  std::size_t connected = 0;
  std::size_t agents_up = 0;
  std::vector<std::string> pending;  // hosts neither failed nor up yet, in -H order
  std::chrono::milliseconds elapsed{0};
};

// "hvrun: connected 3/5, agents up 2/5" and, once elapsed >= kNamePendingAfter and some host is
// pending, "; waiting for lab7, lab12, lab13 (+3 more)".
std::string progress_text(const StartProgress& p);

}  // namespace hvrun

#pragma once
// The words of the status line while hosts connect and agents come up: counts at first, and from
// kNamePendingAfter on also the hosts still pending, so an unreachable host shows by name long before
// its timeout ("connected 1/2, agents up 1/2; waiting for lab7"), and the hosts whose login shell is
// still running, apart, since a slow ~/.bashrc is progress, not a dead host. Also the bound such a
// host gets and what is said when it runs out.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun {

inline constexpr std::chrono::milliseconds kNamePendingAfter{2000};
// At most this many pending hosts are named; the rest are counted ("(+3 more)").
inline constexpr std::size_t kPendingNamed = 3;

// A host whose SSH session is up and whose login shell was asked to run the agent counts as stuck
// only after this many times --start-timeout (300 s by default): a shell that takes a lock shared by
// every host (pyenv's rehash in an NFS home) runs one host after the other, and mpirun waits that out.
inline constexpr int kShellTimeoutFactor = 10;
inline std::chrono::milliseconds shell_timeout_of(std::chrono::milliseconds start_timeout) {
  return start_timeout * kShellTimeoutFactor;
}

struct StartProgress {
  std::size_t hosts = 0;
  std::size_t connected = 0;
  std::size_t agents_up = 0;
  std::vector<std::string> pending;  // hosts neither failed nor up yet, nor in their shell, in -H order
  std::chrono::milliseconds elapsed{0};
  std::vector<std::string> in_shell{};  // pending hosts whose login shell runs, in -H order
  std::chrono::milliseconds longest_shell{0};  // how long the oldest of those has run
};

// "hvrun: connected 3/5, agents up 2/5" and, once elapsed >= kNamePendingAfter, "; lab3: its login
// shell has run for 12 s (a slow ~/.bashrc?)" (or "28 hosts: their login shell has run ...") while a
// shell has run that long, and "; waiting for lab7, lab12, lab13 (+3 more)" for the other pending hosts.
std::string progress_text(const StartProgress& p);

// "lab5: its login shell has run for 31 s and hvrun-agent has not started; time it with: ssh lab5 true"
std::string shell_stuck_text(const std::string& host, std::chrono::milliseconds ran);

}  // namespace hvrun

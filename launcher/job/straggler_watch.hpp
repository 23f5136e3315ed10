#pragma once
// Issue 40: which rank holds a synchronous job back, from what the agents observe of their ranks, with the
// program unchanged. In a data-parallel job every step goes at the pace of the slowest rank: while it
// computes, waits for its own data or is starved of CPU, every other rank waits in its collective. So a
// rank that waits little while the others wait much is the one they wait for, and what it does instead
// is the cause. Pure: fed one window of every rank's shares at a time, it says when a rank starts and
// stops holding the job back; unit-tested on recorded windows (tests/test_straggler_watch.cpp).
//
// Not named: a uniform job (every rank waits alike), a job whose ranks all slow down together (a shared
// file system pause: nobody waits for anybody), and a rank that does a little more than the others (rank
// 0's logging: the others wait somewhat, not most of the time). A rank is named after `onset` windows in
// a row (at 2 s windows, within 10 s of the onset), and said to recover after `recovery` windows in a
// row without; one line per rank and cause a minute at most (a recovery follows its onset's line).
#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hvrun {

// One rank's shares of one window (each 0..1 of the window's wall time), from its agent's samples of the
// rank's main thread (/proc/PID/task/PID/stat and syscall) and its cgroup.
struct RankShares {
  int rank = 0;
  std::string host;
  double busy = 0;      // running on a CPU
  double waiting = 0;   // blocked on the network or on a peer: a collective (futex, poll, a socket read)
  double own_data = 0;  // blocked on its own input: a file read, the disk (D), a sleep
  double starved = 0;   // runnable but not running: run-queue delay plus cgroup throttling
  double cpu_limit = 0; // the CPUs its cgroup's quota allows (0: no quota)
  // Its slowest and its fastest TCP connection that sent data in the window (the kernel's delivery rate,
  // bytes/s; 0: none sent) and the host at the other end ("" when not a job host).
  double send_rate = 0;
  std::string send_peer;
  double fast_rate = 0;
  std::string fast_peer;
};

class StragglerWatch {
 public:
  using Clock = std::chrono::steady_clock;

  struct Settings {
    std::chrono::milliseconds window{2000};
    int onset = 3;                  // windows in a row before a rank is named
    int recovery = 3;               // windows in a row without, before it is said to recover
    double others_wait = 0.5;       // the others' median waiting share at least this
    double own_ratio = 0.6;         // the rank's own waiting share at most this part of the others'
    double gap = 0.3;               // and at least this far below it (a starved rank still waits for
                                    // the others' compute: 0.37 against their 0.70, measured)
    double starved = 0.2;           // a starved share at least this makes starvation the cause
    std::chrono::seconds repeat{60};  // one onset line per rank and cause in this time at most
    double slow_link = 0.25;        // a host's connections below this part of the others': a slow link
  };

  // kLink: a host's network link (Event::rank is -1, Event::host the host).
  enum class Cause { kComputes, kOwnData, kStarved, kLink };

  struct Event {
    bool recovered = false;  // false: holds the job back from now; true: no longer
    int rank = 0;
    std::string host;
    Cause cause = Cause::kComputes;
    std::string text;  // the line for the user
  };

  StragglerWatch() : StragglerWatch(Settings{}) {}
  explicit StragglerWatch(Settings settings) : settings_(settings) {}

  // One window of every running rank's shares (two or more ranks, or nothing is ever named). Returns the
  // lines this window brings.
  std::vector<Event> window(const std::vector<RankShares>& ranks, Clock::time_point now);

  // The ranks named now (onset said, recovery not yet), by rank.
  std::vector<int> named() const;

  static const char* cause_name(Cause cause);

 private:
  struct Track {
    int streak = 0;      // windows in a row as a candidate
    int clear = 0;       // windows in a row not a candidate, while named
    bool named = false;  // named: onset reached, recovery not yet
    bool said = false;   // its onset line was printed (not held back by Settings::repeat)
    Cause cause = Cause::kComputes;
  };
  // What one window does to a track: names it (after `onset` windows in a row), says it recovered (after
  // `recovery` without, when its onset was said), or neither.
  enum class Turn { kNone, kOnset, kRecovered };
  Turn step(Track& t, bool candidate) const;
  // Whether an onset line may be said now (one per `repeat`), stamping `last` when it may.
  bool may_say(Clock::time_point& last, Clock::time_point now) const;
  Cause cause_of(const RankShares& r) const;
  void judge_links(const std::vector<RankShares>& ranks, Clock::time_point now, std::vector<Event>& events);
  std::string onset_text(const RankShares& r, Cause cause, double others_wait) const;

  Settings settings_;
  std::map<int, Track> tracks_;
  std::map<std::string, Track> link_tracks_;  // by host
  std::map<std::string, Clock::time_point> link_last_line_;
  std::map<std::pair<int, Cause>, Clock::time_point> last_line_;
};

}  // namespace hvrun

#pragma once
// Warnings about what strangers do (connections refused, closed unauthenticated, accept errors), said a
// few times with a count instead of once per event: a flood must not flood the user's terminal too.
// The first event of a kind is logged at once; later ones are counted, and the counts are logged as one
// summary line per kind `first_summary` after that, then at most every `later_summaries` while they
// grow, and once more when the log is destroyed. At most kMaxKinds kinds are told apart; events of
// further kinds are summed up under the last one's wording with the peer "other addresses".
// Runs in a single-threaded io_context; make it with std::make_shared (the timer holds a weak reference).
#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/log.hpp"

namespace hvrun {

class ThrottledLog : public std::enable_shared_from_this<ThrottledLog> {
 public:
  // Writes a line for `count` events of one kind (count >= 1).
  using Line = std::function<std::string(std::uint64_t count)>;
  static constexpr std::size_t kMaxKinds = 32;

  ThrottledLog(boost::asio::io_context& io, LogSubsys subsys,
               std::chrono::milliseconds first_summary = std::chrono::seconds(1),
               std::chrono::milliseconds later_summaries = std::chrono::seconds(30));
  ~ThrottledLog();  // logs what is still counted
  ThrottledLog(const ThrottledLog&) = delete;
  ThrottledLog& operator=(const ThrottledLog&) = delete;

  // One event of kind `kind`; `line` words it (kept from the kind's first event).
  void note(const std::string& kind, Line line);
  std::uint64_t total() const { return total_; }
  // Logs every count not yet logged now.
  void flush();

 private:
  struct Kind {
    Line line;
    std::uint64_t unlogged = 0;
  };
  void arm();
  void say(const std::string& text);

  boost::asio::steady_timer timer_;
  LogSubsys subsys_;
  std::chrono::milliseconds first_summary_;
  std::chrono::milliseconds later_summaries_;
  std::map<std::string, Kind> kinds_;
  std::uint64_t total_ = 0;
  bool armed_ = false;
  bool summarised_once_ = false;
};

// Where every ThrottledLog's lines go instead of its logger when set (the agent sends them to hvrun as
// NoticeMsg). Set and used on the io thread only; an empty function gives the lines back to the loggers.
void set_throttled_log_sink(std::function<void(const std::string& line)> sink);

// 2997 -> "2,997": counts in messages.
std::string count_text(std::uint64_t n);

}  // namespace hvrun

#include "common/throttled_log.hpp"

namespace hvrun {

namespace {

std::function<void(const std::string&)>& sink() {
  static std::function<void(const std::string&)> s;
  return s;
}

}  // namespace

void set_throttled_log_sink(std::function<void(const std::string& line)> s) { sink() = std::move(s); }

ThrottledLog::ThrottledLog(boost::asio::io_context& io, LogSubsys subsys, std::chrono::milliseconds first_summary,
                           std::chrono::milliseconds later_summaries)
    : timer_(io), subsys_(subsys), first_summary_(first_summary), later_summaries_(later_summaries) {}

ThrottledLog::~ThrottledLog() { flush(); }

void ThrottledLog::note(const std::string& kind, Line line) {
  ++total_;
  auto it = kinds_.find(kind);
  if (it == kinds_.end() && kinds_.size() >= kMaxKinds) it = kinds_.find("\x7f other");
  if (it == kinds_.end() && kinds_.size() >= kMaxKinds) {
    // Words the kinds beyond the bound with the first of them; its peer is only one of several.
    it = kinds_.emplace("\x7f other", Kind{std::move(line), 0}).first;
    it->second.line = [wording = it->second.line](std::uint64_t n) {
      return wording(n) + " (and from other addresses: more than " + std::to_string(kMaxKinds) + " sources)";
    };
  }
  if (it == kinds_.end()) {
    // The first of its kind: said at once.
    const std::string text = line(1);
    kinds_.emplace(kind, Kind{std::move(line), 0});
    say(text);
    return;
  }
  ++it->second.unlogged;
  arm();
}

void ThrottledLog::say(const std::string& text) {
  if (sink())
    sink()(text);
  else
    log_of(subsys_).warn("{}", text);
}

void ThrottledLog::arm() {
  if (armed_) return;
  armed_ = true;
  timer_.expires_after(summarised_once_ ? later_summaries_ : first_summary_);
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) {
      self->armed_ = false;
      self->summarised_once_ = true;
      self->flush();
    }
  });
}

void ThrottledLog::flush() {
  for (auto& [kind, k] : kinds_) {
    if (k.unlogged == 0) continue;
    const std::string text = k.line(k.unlogged);
    k.unlogged = 0;
    say(text);
  }
}

std::string count_text(std::uint64_t n) {
  std::string digits = std::to_string(n);
  for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

}  // namespace hvrun

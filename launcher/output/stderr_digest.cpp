#include "launcher/output/stderr_digest.hpp"

#include "common/crash_report.hpp"

namespace hvrun {

namespace {

constexpr std::string_view kFatalPython = "Fatal Python error:";
constexpr std::string_view kTraceback = "Traceback (most recent call last):";
constexpr std::string_view kFaultAddress = "fault address ";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

void StderrDigest::line(std::string_view text) {
  const std::string_view header = crash_report::kCrashHeader;
  const std::string_view footer = crash_report::kCrashFooter;
  const bool fatal_python = starts_with(text, kFatalPython);
  const bool native_header = starts_with(text, header) && text != footer;
  // A new report starts with faulthandler's line, or with the native header unless that header ends
  // the Python part of the same report (faulthandler chains to hvrun's handler).
  if (fatal_python || (native_header && !(in_ == In::kCrash && !native_seen_))) {
    if (in_ != In::kCrash) before_crash_ = recent_;
    crash_.clear();
    crash_dropped_ = 0;
    fault_address_.reset();
    native_seen_ = false;
    in_ = In::kCrash;
  }
  if (in_ == In::kCrash) {
    if (crash_.size() < kMaxCrashLines) crash_.emplace_back(text);
    else ++crash_dropped_;
    if (native_header) {
      native_seen_ = true;
      if (const auto at = text.find(kFaultAddress); at != std::string_view::npos) {
        const auto begin = at + kFaultAddress.size();
        const auto end = text.find_first_of(", ", begin);
        fault_address_ = std::string(text.substr(begin, end == std::string_view::npos ? end : end - begin));
      }
    }
    if (text == footer) in_ = In::kNothing;
    return;
  }
  recent_.emplace_back(text);
  if (recent_.size() > kLinesBefore) recent_.erase(recent_.begin());
  if (text == kTraceback) {
    in_ = In::kTraceback;
    return;
  }
  if (in_ == In::kTraceback) {
    // Frames and their source lines are indented; the first line that is not ends the traceback and
    // names the exception (a chained one's "During handling ..." is followed by its own traceback).
    if (text.empty() || text.front() == ' ' || text.front() == '\t') return;
    exception_ = std::string(text);
    in_ = In::kNothing;
  }
}

std::vector<std::string> StderrDigest::crash_report() const {
  std::vector<std::string> out = crash_;
  if (crash_dropped_ > 0) out.push_back("... " + std::to_string(crash_dropped_) + " more lines");
  return out;
}

}  // namespace hvrun

#include "agent/crash_text_filter.hpp"

#include "common/crash_report.hpp"

namespace hvrun {

namespace {

constexpr std::string_view kHeader = crash_report::kCrashHeader;

// A line start that is, or may become once more bytes come, a crash header.
bool may_be_header(std::string_view start) {
  return start.size() <= kHeader.size() ? kHeader.substr(0, start.size()) == start : start.substr(0, kHeader.size()) == kHeader;
}

}  // namespace

std::string CrashTextFilter::feed(std::string_view bytes) {
  std::string out;
  if (mid_line_) {
    // The rest of a line already passed on: it passes too.
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) return std::string(bytes);
    out.append(bytes.substr(0, nl + 1));
    bytes.remove_prefix(nl + 1);
    mid_line_ = false;
  }
  if (!names_ && held_.empty() && bytes.find(kHeader) == std::string_view::npos) {
    // No report here (the common case): all of it at once, bar a last line that may start one.
    const std::size_t last = bytes.rfind('\n');
    const std::string_view tail = last == std::string_view::npos ? bytes : bytes.substr(last + 1);
    if (!tail.empty() && may_be_header(tail)) {
      held_.assign(tail);
      bytes.remove_suffix(tail.size());
    } else {
      mid_line_ = !tail.empty();
    }
    out.append(bytes);
    return out;
  }
  held_.append(bytes);
  std::size_t pos = 0;
  for (std::size_t nl; (nl = held_.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    line(std::string_view(held_).substr(pos, nl - pos), out);
    out += '\n';
  }
  held_.erase(0, pos);
  const bool hold = held_.size() < kMaxHeld && (names_ || may_be_header(held_));
  if (!held_.empty() && !hold) {
    out += held_;
    held_.clear();
    mid_line_ = true;
  }
  return out;
}

std::string CrashTextFilter::flush() {
  std::string out;
  if (!held_.empty()) line(held_, out);
  held_.clear();
  names_.reset();
  mid_line_ = false;
  return out;
}

void CrashTextFilter::line(std::string_view text, std::string& out) {
  if (names_) {
    if (text == crash_report::kCrashFooter || ++report_lines_ > kMaxReportLines) {
      names_.reset();
    } else if (auto named = names_->name_line(text)) {
      out += *named;
      return;
    }
  } else if (text.substr(0, kHeader.size()) == kHeader && text != crash_report::kCrashFooter) {
    names_ = std::make_unique<FrameNames>();
    report_lines_ = 0;
  }
  out += text;
}

}  // namespace hvrun

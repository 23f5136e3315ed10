#pragma once
// A rank's stderr on its way to the launcher, with the frames of the crash reports that
// libhvrun_crash.so writes there named (FrameNames): between a crash header and its footer
// (common/crash_report.hpp), each raw frame line becomes a named one. Everything else passes
// through unchanged and at once; only a line that may be or is inside a report is held until its
// newline, so that it is read whole (a pipe read may end anywhere): one that starts as the header
// does, and, within a report, any line (bounded: kMaxHeld bytes, and kMaxReportLines lines without a
// footer end the report).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "agent/frame_names.hpp"

namespace hvrun {

class CrashTextFilter {
 public:
  static constexpr std::size_t kMaxHeld = 8192;
  static constexpr std::size_t kMaxReportLines = 256;

  // What to send on for the next bytes read from the stream (possibly nothing yet).
  std::string feed(std::string_view bytes);
  // What is held, at the end of the stream.
  std::string flush();

 private:
  void line(std::string_view text, std::string& out);  // a whole line, without its newline

  std::string held_;
  bool mid_line_ = false;  // the last bytes sent on ended inside a line
  std::size_t report_lines_ = 0;
  std::unique_ptr<FrameNames> names_;  // while inside a report
};

}  // namespace hvrun

#pragma once
// What a rank's stderr says of how it ended, kept line by line as the output passes: the last crash
// report (Python faulthandler's "Fatal Python error: ..." dump, then or alone hvrun's native stack
// between common/crash_report.hpp's header and footer), bounded, with the fault address its
// header names; and the exception line of the last Python traceback ("ValueError: bad shard").
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

class StderrDigest {
 public:
  // The most lines a crash report keeps; the rest are counted.
  static constexpr std::size_t kMaxCrashLines = 80;
  // The stderr lines kept from just before a crash report ("about to load shard 7").
  static constexpr std::size_t kLinesBefore = 5;

  void line(std::string_view line);

  // The last crash report, whole up to kMaxCrashLines (then a line counting the rest); empty if none.
  std::vector<std::string> crash_report() const;
  // The last kLinesBefore stderr lines before that report.
  const std::vector<std::string>& lines_before_crash() const { return before_crash_; }
  // "0x0" from the native header of the last crash report, if it named one.
  const std::optional<std::string>& fault_address() const { return fault_address_; }
  // The exception line that ended the last Python traceback; "" if none.
  const std::string& exception() const { return exception_; }

 private:
  enum class In { kNothing, kCrash, kTraceback };
  In in_ = In::kNothing;
  bool native_seen_ = false;  // the current crash report has reached hvrun's native header
  std::vector<std::string> crash_;
  std::vector<std::string> recent_, before_crash_;
  std::size_t crash_dropped_ = 0;
  std::optional<std::string> fault_address_;
  std::string exception_;
};

}  // namespace hvrun

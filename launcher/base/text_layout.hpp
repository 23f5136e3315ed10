#pragma once
// Laying out report text for a terminal: joining, padding, wrapping to a width.
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun {

// Reports wrap to this many columns when stdout is not a terminal (a file, a pipe, a ticket).
inline constexpr std::size_t kDefaultReportWidth = 100;

std::string join_words(const std::vector<std::string>& items, const std::string& sep = ", ");
std::string pad_right(const std::string& s, std::size_t width);

// `line` (no newline in it) broken at spaces into lines of at most `width` characters, continuation
// lines indented by `indent` spaces; a word longer than a line is cut after its last comma that fits,
// else at the width. Each line ends with '\n'.
std::string wrap_line(const std::string& line, std::size_t width, std::size_t indent = 4);

// "37 %": a share (0..1, clamped) as a whole percent.
std::string percent_text(double share);

// Now as ISO 8601 UTC with milliseconds ("2026-12-07T06:06:15.470Z"): output lines' timestamps, --events.
std::string utc_timestamp();

// The width of the terminal on `fd` (TIOCGWINSZ), or kDefaultReportWidth when it is not a terminal.
std::size_t terminal_width(int fd);

}  // namespace hvrun

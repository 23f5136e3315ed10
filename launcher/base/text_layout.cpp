#include "launcher/base/text_layout.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace hvrun {

std::string join_words(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string pad_right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string wrap_line(const std::string& line, std::size_t width, std::size_t indent) {
  const std::size_t first = line.find_first_not_of(' ');
  if (first == std::string::npos) return line + "\n";
  width = std::max<std::size_t>(width, std::max(indent, first) + 20);  // usable however narrow the terminal
  std::string out;
  std::string current = line.substr(0, first);  // a line keeps its own indentation
  bool fresh = true;                            // nothing but indentation in `current` yet
  const std::string lead(indent, ' ');
  const auto next_line = [&] {
    while (!current.empty() && current.back() == ' ') current.pop_back();
    out += current + "\n";
    current = lead;
    fresh = true;
  };
  std::size_t pos = first;
  while (pos <= line.size()) {
    std::size_t end = line.find(' ', pos);
    if (end == std::string::npos) end = line.size();
    std::string word = line.substr(pos, end - pos);
    pos = end + 1;
    const bool fits_a_line = word.size() <= width - indent;
    if (!fresh && current.size() + 1 + word.size() > width) {
      if (fits_a_line || current.size() + 8 > width) {
        next_line();
        if (word.empty()) continue;  // padding at a break is dropped
      }
    }
    if (!fresh) current += ' ';
    fresh = false;
    // A word longer than a line fills this one and goes on: cut after its last comma that fits
    // ("node[1,9,...]"), else at the width.
    while (current.size() + word.size() > width) {
      const std::size_t room = width - current.size();
      const std::size_t comma = word.rfind(',', room - 1);
      const std::size_t cut = comma != std::string::npos ? comma + 1 : room;
      current += word.substr(0, cut);
      word = word.substr(cut);
      next_line();
      fresh = false;
    }
    current += word;
  }
  return out + current + "\n";
}

std::size_t terminal_width(int fd) {
  if (::isatty(fd) != 1) return kDefaultReportWidth;
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return kDefaultReportWidth;
  return ws.ws_col;
}

std::string percent_text(double share) {
  return std::to_string(static_cast<int>(std::lround(std::clamp(share, 0.0, 1.0) * 100))) + " %";
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

}  // namespace hvrun

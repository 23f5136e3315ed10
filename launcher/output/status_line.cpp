#include "launcher/output/status_line.hpp"

#include <unistd.h>

#include "common/write_fully.hpp"

namespace hvrun {

StatusLine::StatusLine(int fd) : fd_(fd), tty_(::isatty(fd) == 1) {}

void StatusLine::show(const std::string& text) {
  if (!tty_) return;
  write_fully(fd_, "\r" + text + "\x1b[K");
  shown_ = true;
}

void StatusLine::clear() {
  if (!tty_ || !shown_) return;
  write_fully(fd_, "\r\x1b[K");
  shown_ = false;
}

}  // namespace hvrun
